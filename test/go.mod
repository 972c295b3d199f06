module platform.io/test

go 1.26

replace (
	platform.io/libs => ../libs
	platform.io/proto => ../proto
)
