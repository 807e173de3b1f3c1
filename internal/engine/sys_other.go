//go:build !linux

package engine

import "golang.org/x/sys/unix"

// futimens sets an open file's mtime (and atime). Without futimens in
// x/sys for these systems (macOS), futimes keeps microseconds only.
func futimens(fd int, ns int64) error {
	tv := unix.NsecToTimeval(ns)
	return unix.Futimes(fd, []unix.Timeval{tv, tv})
}

// syncFS flushes the filesystems: there is no syncfs here.
func syncFS(int) error { return unix.Sync() }
