package embedded

import (
	"os"
	"syscall"
)

// fdatasync makes f's written data durable, and its size, without the rest of its metadata.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
