package engine

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// errVanished means a path disappeared or stopped being a regular file
// between the walk and the read: Jenkins deleted a build or renamed a temp
// file away. The snapshot leaves it out.
var errVanished = errors.New("vanished")

// openRegular opens a regular file without following symlinks and returns
// its metadata at open time.
func openRegular(path string) (*os.File, *unix.Stat_t, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			return nil, nil, errVanished
		case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
			return nil, nil, fmt.Errorf("cannot read %s: permission denied; run homesnap as the home's owner (uid 1000 in the Jenkins image) or fix the file's mode", path)
		}
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, nil, errVanished
	}
	return f, &st, nil
}

// changedSince reports whether the open file changed after st was taken.
func changedSince(f *os.File, st *unix.Stat_t) bool {
	var now unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &now); err != nil {
		return true
	}
	return now.Size != st.Size || now.Mtim != st.Mtim || now.Ctim != st.Ctim
}
