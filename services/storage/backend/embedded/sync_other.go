//go:build !linux

package embedded

import "os"

// fdatasync makes f's written data durable: fsync where there is no fdatasync (on macOS, Go's
// Sync is F_FULLFSYNC, which also flushes the drive's cache).
func fdatasync(f *os.File) error {
	return f.Sync()
}
