package engine

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// futimens sets an open file's mtime (and atime) with nanoseconds.
func futimens(fd int, ns int64) error {
	ts := [2]unix.Timespec{unix.NsecToTimespec(ns), unix.NsecToTimespec(ns)}
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// syncFS flushes the filesystem holding dir: one syncfs instead of an
// fsync per file.
func syncFS(dir int) error { return unix.Syncfs(dir) }
