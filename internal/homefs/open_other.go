//go:build !linux

// Without openat2 and O_PATH (macOS, where restore runs for disaster
// recovery), every path is walked one O_NOFOLLOW open at a time, and what
// Linux does on an O_PATH descriptor is done on the parent directory's
// descriptor by name, with AT_SYMLINK_NOFOLLOW.

package homefs

import "golang.org/x/sys/unix"

// searchDir returns the flags that open a directory only to resolve names
// beneath it.
func searchDir() int { return portableSearchDir }

// OpenRaw opens rel beneath d with flags (O_CLOEXEC is added; O_CREAT is
// not allowed: see WriteFile) and returns the raw descriptor. Any symlink
// on the way, the last component included, fails with ELOOP.
func (d Dir) OpenRaw(rel string, flags int) (int, error) {
	if rel == "" {
		rel = "."
	}
	return d.walk(rel, flags|unix.O_CLOEXEC)
}

// Lstat returns rel's metadata without following it.
func (d Dir) Lstat(rel string, st *unix.Stat_t) error { return d.lstatByParent(rel, st) }

// ChmodFunc is Chmod with the mode chosen by whether rel is a directory,
// as seen on the inode it changes: a file swapped in for a directory
// meanwhile cannot be given the directory's mode (its setgid bit, say).
func (d Dir) ChmodFunc(rel string, mode func(isDir bool) uint32) error {
	return d.SetMeta(rel, Meta{Mode: mode})
}

// SetMeta sets rel's owner, then its mode (after chown, which clears
// setuid and setgid), then its times, a symlink's own when rel is one
// (which has no mode: see Meta). It
// refuses, changing nothing, an inode that is not a directory and has
// more than one link (ErrHardLinked).
func (d Dir) SetMeta(rel string, m Meta) error { return d.setMetaByParent(rel, m) }

// renameNoReplace has no atomic variant here.
var renameNoReplace = renameNoReplaceByCheck
