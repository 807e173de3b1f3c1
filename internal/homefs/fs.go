package homefs

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// FS returns the tree beneath d as an fs.FS whose Open refuses symlinks
// (in any component) and anything but regular files and directories, so
// code written for fs.FS (the agent check) cannot be led out of the home
// or into a device. Sizes are the reader's to bound.
// d stays the caller's to close.
func FS(d Dir) fs.FS { return dirFS(d) }

type dirFS Dir

func (f dirFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	fd, err := Dir(f).OpenRaw(name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFDIR {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: name, Err: ErrNotRegular}
	}
	// An os.File lists a directory with the entries' own types (lstat),
	// so a symlink reads as one.
	return os.NewFile(uintptr(fd), name), nil
}
