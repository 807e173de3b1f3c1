package testhome

import (
	"time"

	"golang.org/x/sys/unix"
)

// Lchtimes sets a path's mtime (and atime) without following symlinks.
func Lchtimes(p string, t time.Time) error {
	ts := unix.NsecToTimespec(t.UnixNano())
	return unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}
