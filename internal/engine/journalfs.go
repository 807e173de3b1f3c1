package engine

import (
	"errors"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Descriptor primitives for restore state a home writer may have tampered
// with: every path is resolved beneath a directory descriptor with no
// symlink followed on the way, and the last component is acted on without
// following it either. (Candidates for internal/homefs.)

// openDirBeneath opens the directory rel ("" for dir itself) beneath dir.
// A symlink anywhere on the way fails with ELOOP.
func openDirBeneath(dir int, rel string) (int, error) {
	if rel == "" {
		rel = "."
	}
	fd, err := unix.Openat2(dir, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
	})
	if !errors.Is(err, unix.ENOSYS) {
		return fd, err
	}
	// Before Linux 5.6: one component at a time, none followed.
	fd, err = unix.Dup(dir)
	if err != nil {
		return -1, err
	}
	for _, name := range strings.Split(rel, "/") {
		if name == ".." {
			unix.Close(fd)
			return -1, unix.EXDEV
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// parentBeneath opens the parent of rel beneath dir and returns it with
// rel's last component.
func parentBeneath(dir int, rel string) (int, string, error) {
	parent, base := "", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		parent, base = rel[:i], rel[i+1:]
	}
	fd, err := openDirBeneath(dir, parent)
	return fd, base, err
}

// renameBeneath moves rel beneath from to the same relative path beneath
// to, refusing to replace anything there.
func renameBeneath(from int, rel string, to int) error {
	fp, base, err := parentBeneath(from, rel)
	if err != nil {
		return err
	}
	defer unix.Close(fp)
	tp, _, err := parentBeneath(to, rel)
	if err != nil {
		return err
	}
	defer unix.Close(tp)
	return renameNoReplace(fp, base, tp, base)
}

func renameNoReplace(fromDir int, from string, toDir int, to string) error {
	err := unix.Renameat2(fromDir, from, toDir, to, unix.RENAME_NOREPLACE)
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	// A filesystem without RENAME_NOREPLACE: check, then rename (the
	// home is locked against other restores; a home writer racing here
	// can only lose its own path).
	var st unix.Stat_t
	if err := unix.Fstatat(toDir, to, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		return unix.EEXIST
	}
	return unix.Renameat(fromDir, from, toDir, to)
}

// chmodNoFollow sets the mode of name in dir, which must not be a symlink
// (a symlink is left alone): the mode goes through a descriptor of the
// inode itself, so a path swapped for a symlink cannot redirect it. mode
// is told whether the inode is a directory.
func chmodNoFollow(dir int, name string, mode func(isDir bool) uint32) error {
	fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return nil
	}
	return fchmodPath(fd, mode(st.Mode&unix.S_IFMT == unix.S_IFDIR))
}

// fchmodPath changes the mode of an O_PATH descriptor's inode: fchmodat2
// (Linux 6.6) or, before it, the descriptor's /proc link, which names the
// inode and not a path.
func fchmodPath(fd int, mode uint32) error {
	err := unix.Fchmodat(fd, "", mode, unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		err = unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), mode, 0)
	}
	return err
}

// removeTreeAt removes name in dir and everything below it, never
// following a symlink; directories it cannot enter or empty (restored
// read-only modes) are given 0700 first through their descriptor.
func removeTreeAt(dir int, name string) error {
	err := unix.Unlinkat(dir, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) {
		return err
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) {
		if err = chmodNoFollow(dir, name, func(bool) uint32 { return 0o700 }); err == nil {
			fd, err = unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
	}
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&0o700 != 0o700 {
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return err
		}
	}
	for {
		names, err := f.Readdirnames(1024)
		for _, n := range names {
			if err := removeTreeAt(fd, n); err != nil {
				return err
			}
		}
		if len(names) == 0 || err != nil {
			break
		}
	}
	return unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
}

// removeEmptyDirsAt removes name in dir if it holds nothing but
// directories (the parents prepared for displaced paths); it reports
// false, removing nothing more, if it finds anything else.
func removeEmptyDirsAt(dir int, name string) (bool, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return false, err
	}
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return false, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return false, nil
		}
		if ok, err := removeEmptyDirsAt(fd, n); !ok || err != nil {
			return false, err
		}
	}
	return true, unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
}

// readDirNames lists the names in an open directory without consuming
// its descriptor.
func readDirNames(dir int) ([]string, error) {
	fd, err := unix.Openat(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	return f.Readdirnames(-1)
}
