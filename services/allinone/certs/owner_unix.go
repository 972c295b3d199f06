//go:build unix

package certs

import (
	"fmt"
	"os"
	"syscall"
)

// ownerOf returns the numeric owner of path.
func ownerOf(path string) (uid, gid int, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fmt.Errorf("%s: no owner information", path)
	}
	return int(st.Uid), int(st.Gid), nil
}
