package file

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing a range of f out.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
