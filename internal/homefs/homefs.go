// Package homefs is the only code that touches a Jenkins home by path.
//
// Build code running as the Jenkins user can write anywhere in the home at
// any moment, also while homesnap runs, so every path is resolved relative
// to a directory descriptor, beneath it, with no symlink in any component
// (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or a walk of O_NOFOLLOW
// opens where the kernel lacks openat2 or a seccomp profile refuses it, and
// on macOS). Metadata is changed on opened descriptors (or, without O_PATH,
// by name in the opened parent with AT_SYMLINK_NOFOLLOW), never on an inode
// that is not a directory and has more than one link (ErrHardLinked), reads
// are of regular files only and bounded, and temporary files are created
// O_EXCL after whatever sits at their name is unlinked.
package homefs

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/sys/unix"
)

var (
	// ErrNotRegular means a path that must be a regular file is something
	// else (a device, a FIFO, a directory or a symlink).
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge means a file is larger than its reader accepts.
	ErrTooLarge = errors.New("larger than the limit")
	// ErrHardLinked means an inode whose metadata was to change is not a
	// directory and has more than one link. The home's user can link any
	// file of the home's filesystem it can reach (with
	// fs.protected_hardlinks=0, even one it cannot read) into the home:
	// changing the inode would change that file, outside the home.
	ErrHardLinked = errors.New("has more than one hard link (another name, maybe outside the home, shares its inode)")
)

// checkLinks refuses, with ErrHardLinked, an inode that is not a
// directory (which cannot be hard-linked) and has more than one link.
func checkLinks(st *unix.Stat_t) error {
	if st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Nlink > 1 {
		return fmt.Errorf("%w: %d links", ErrHardLinked, st.Nlink)
	}
	return nil
}

// Meta is what SetMeta changes; a nil field is left as it is.
type Meta struct {
	Owner *Owner
	// Mode is chosen by whether rel is a directory, as seen on the inode
	// it changes. A symlink has no mode: with Mode set, one is refused
	// (ELOOP), changing nothing.
	Mode  func(isDir bool) uint32
	Times []unix.Timespec // access and modification
}

// Dir is an open directory descriptor: the home, or a directory opened
// beneath it. Paths given to its methods are slash-separated and relative;
// none of their components may be a symlink or "..".
type Dir int

// Open opens a home by its path. The path itself comes from the
// configuration and is trusted; everything below it is not.
func Open(path string) (Dir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &PathError{Op: "open", Path: path, Err: err}
	}
	return Dir(fd), nil
}

// Fd returns the descriptor.
func (d Dir) Fd() int { return int(d) }

// Close closes the descriptor.
func (d Dir) Close() error { return unix.Close(int(d)) }

// PathError names a failed operation and its path, relative to the
// directory it was resolved beneath (the caller knows which one).
type PathError struct {
	Op   string
	Path string
	Err  error
}

func (e *PathError) Error() string { return e.Op + " " + e.Path + ": " + e.Err.Error() }
func (e *PathError) Unwrap() error { return e.Err }

// walk opens rel one component at a time, each with O_NOFOLLOW: what
// openat2 does in one call, for kernels before 5.6 and systems without it.
func (d Dir) walk(rel string, flags int) (int, error) {
	parts := strings.Split(rel, "/")
	cur := int(d)
	closeCur := func() {
		if cur != int(d) {
			unix.Close(cur)
		}
	}
	for i, name := range parts {
		if name == ".." || name == "" || name == "." && len(parts) > 1 {
			closeCur()
			return -1, unix.EXDEV
		}
		last := i == len(parts)-1
		f := searchDir() | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if last {
			f = flags | unix.O_NOFOLLOW
		}
		fd, err := unix.Openat(cur, name, f, 0)
		if errors.Is(err, unix.ENOTDIR) { // O_DIRECTORY|O_NOFOLLOW on a symlink
			var st unix.Stat_t
			if unix.Fstatat(cur, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = unix.ELOOP
			}
		}
		closeCur()
		if err != nil {
			return -1, err
		}
		cur = fd
		if !last { // a symlink is ELOOP, as openat2 says
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
				closeCur()
				if err == nil {
					err = unix.ENOTDIR
					if st.Mode&unix.S_IFMT == unix.S_IFLNK {
						err = unix.ELOOP
					}
				}
				return -1, err
			}
		}
	}
	return cur, nil
}

// OpenDir opens a directory beneath d.
func (d Dir) OpenDir(rel string) (Dir, error) {
	fd, err := d.OpenRaw(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return -1, &PathError{Op: "open", Path: rel, Err: err}
	}
	return Dir(fd), nil
}

// OpenRegular opens a regular file beneath d for reading and fills st with
// its metadata as of the open. The open cannot block (O_NONBLOCK: a FIFO
// swapped in is refused, not waited on). Anything not a regular file is
// ErrNotRegular; a symlink on the way is ELOOP.
func (d Dir) OpenRegular(rel string, st *unix.Stat_t) (int, error) {
	fd, err := d.OpenRaw(rel, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK)
	if err != nil {
		return -1, err
	}
	if err := unix.Fstat(fd, st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, ErrNotRegular
	}
	return fd, nil
}

// ReadFile reads a regular file beneath d of at most limit bytes.
func (d Dir) ReadFile(rel string, limit int64) ([]byte, error) {
	var st unix.Stat_t
	fd, err := d.OpenRegular(rel, &st)
	if err != nil {
		return nil, &PathError{Op: "read", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	data, err := ReadLimited(fd, st.Size, limit)
	if err != nil {
		return nil, &PathError{Op: "read", Path: rel, Err: err}
	}
	return data, nil
}

// ReadLimited reads an open file of (about) size bytes to its end,
// refusing more than limit: a file that grows while it is read is bounded
// too.
func ReadLimited(fd int, size, limit int64) ([]byte, error) {
	if size > limit {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, size, limit)
	}
	buf := make([]byte, 0, size+1) // +1: EOF is seen without growing
	for {
		if int64(len(buf)) > limit {
			return nil, fmt.Errorf("%w of %d bytes", ErrTooLarge, limit)
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, err
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// Parent opens rel's parent directory beneath d and returns it with rel's
// last component: the pair every *at call on rel then uses.
func (d Dir) Parent(rel string) (Dir, string, error) {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		fd, err := unix.Dup(int(d)) // callers close what Parent returns
		if err != nil {
			return -1, "", err
		}
		unix.CloseOnExec(fd)
		return Dir(fd), rel, nil
	}
	fd, err := d.OpenRaw(rel[:i], searchDir())
	if err != nil {
		return -1, "", err
	}
	return Dir(fd), rel[i+1:], nil
}

// Chmod sets the permission and special bits of rel, which must not be a
// symlink (ELOOP). It is applied to the inode opened beneath d, never by a
// path (on Linux; elsewhere an inode that cannot be opened for reading is
// changed by its name in its opened parent, never following a symlink).
// Like every metadata change here, it refuses a hard-linked inode
// (ErrHardLinked).
func (d Dir) Chmod(rel string, mode uint32) error {
	return d.ChmodFunc(rel, func(bool) uint32 { return mode })
}

// SetTimes sets rel's access and modification times, a symlink's own when
// rel is one.
func (d Dir) SetTimes(rel string, ts []unix.Timespec) error {
	return d.SetMeta(rel, Meta{Times: ts})
}

// Chown sets rel's owner; a symlink's own owner when rel is one.
func (d Dir) Chown(rel string, uid, gid int) error {
	return d.SetMeta(rel, Meta{Owner: &Owner{uid, gid}})
}

// Rename moves rel beneath d to to beneath dst. Both parents are opened
// beneath their directories, so no component but the last of either side
// is resolved by the rename itself (and renameat never follows the last).
func (d Dir) Rename(rel string, dst Dir, to string) error {
	return d.renameWith(rel, dst, to, func(fp int, fname string, tp int, tname string) error {
		return unix.Renameat(fp, fname, tp, tname)
	})
}

// RenameNoReplace is Rename that fails with EEXIST rather than replace
// anything at to.
func (d Dir) RenameNoReplace(rel string, dst Dir, to string) error {
	return d.renameWith(rel, dst, to, renameNoReplace)
}

// renameNoReplaceByCheck renames where the system or filesystem has no
// atomic no-replace rename: check, then rename. Not atomic: a path made at
// to in between is replaced, so callers that need more must exclude other
// writers of to themselves.
func renameNoReplaceByCheck(fp int, fname string, tp int, tname string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(tp, tname, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		return unix.EEXIST
	}
	return unix.Renameat(fp, fname, tp, tname)
}

// renameWith opens both parents beneath their directories and renames
// between them with rename.
func (d Dir) renameWith(rel string, dst Dir, to string, rename func(fp int, fname string, tp int, tname string) error) error {
	fp, fname, err := d.Parent(rel)
	if err != nil {
		return err
	}
	defer fp.Close()
	tp, tname, err := dst.Parent(to)
	if err != nil {
		return err
	}
	defer tp.Close()
	return rename(int(fp), fname, int(tp), tname)
}

// Readlink returns the target of the symlink rel.
func (d Dir) Readlink(rel string) (string, error) {
	p, name, err := d.Parent(rel)
	if err != nil {
		return "", err
	}
	defer p.Close()
	return ReadlinkAt(int(p), name)
}

// ReadlinkAt reads the target of the symlink name in dir.
func ReadlinkAt(dir int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// Owner is the owner WriteFile gives a file; nil keeps the writer's.
type Owner struct{ UID, GID int }

// WriteFile replaces rel with data, atomically: it writes a temporary file
// next to it (tmp, a name in rel's directory), syncs it and renames it over
// rel. Whatever is at tmp is unlinked first and the temporary file is
// created O_EXCL, so a symlink or file planted at that name is never
// written through. perm is applied to the descriptor, not by a path.
func (d Dir) WriteFile(rel, tmp string, data []byte, perm uint32, owner *Owner) error {
	p, name, err := d.Parent(rel)
	if err != nil {
		return &PathError{Op: "write", Path: rel, Err: err}
	}
	defer p.Close()
	if strings.Contains(tmp, "/") || tmp == "" || tmp == name {
		return &PathError{Op: "write", Path: rel, Err: fmt.Errorf("bad temporary name %q", tmp)}
	}
	err = writeTemp(int(p), tmp, data, perm, owner)
	if err == nil {
		err = unix.Renameat(int(p), tmp, int(p), name)
	}
	if err != nil {
		unix.Unlinkat(int(p), tmp, 0)
		return &PathError{Op: "write", Path: rel, Err: err}
	}
	return nil
}

func writeTemp(dir int, name string, data []byte, perm uint32, owner *Owner) error {
	if err := unix.Unlinkat(dir, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s left in the way: %w", name, err)
	}
	fd, err := unix.Openat(dir, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if owner != nil {
		if err := unix.Fchown(fd, owner.UID, owner.GID); err != nil {
			return err
		}
	}
	if err := unix.Fchmod(fd, perm); err != nil { // the umask narrowed the create
		return err
	}
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return unix.Fsync(fd)
}

// Probe creates a file named name in d, afresh, returns its metadata (its
// ctime is the filesystem's clock now) and removes it again.
func (d Dir) Probe(name string, st *unix.Stat_t) error {
	err := writeTemp(int(d), name, nil, 0o600, nil)
	if err == nil {
		err = unix.Fstatat(int(d), name, st, unix.AT_SYMLINK_NOFOLLOW)
	}
	unix.Unlinkat(int(d), name, 0)
	return err
}

// Mkdir creates the directory rel beneath d; one that exists already is
// fine when it is a directory (not a symlink to one).
func (d Dir) Mkdir(rel string, perm uint32) error {
	p, name, err := d.Parent(rel)
	if err != nil {
		return err
	}
	defer p.Close()
	err = unix.Mkdirat(int(p), name, perm)
	if errors.Is(err, unix.EEXIST) {
		var st unix.Stat_t
		if err = unix.Fstatat(int(p), name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			err = unix.ENOTDIR
		}
	}
	return err
}

// RemoveAll removes rel and everything below it, never following a
// symlink. Directories without write or search permission (restored modes
// such as 0555) are made accessible first.
func (d Dir) RemoveAll(rel string) error {
	p, name, err := d.Parent(rel)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &PathError{Op: "remove", Path: rel, Err: err}
	}
	defer p.Close()
	if err := removeAt(int(p), name); err != nil {
		return &PathError{Op: "remove", Path: rel, Err: err}
	}
	return nil
}

func removeAt(dir int, name string) error {
	err := unix.Unlinkat(dir, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) {
		if err := Dir(dir).Chmod(name, 0o700); err != nil {
			return err
		}
		fd, err = unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return err
	}
	unix.Fchmod(fd, 0o700) // entries can be unlinked only from a writable directory
	for {
		names, err := ReadNames(fd)
		if err != nil {
			unix.Close(fd)
			return err
		}
		if len(names) == 0 {
			break
		}
		for _, n := range names {
			if err := removeAt(fd, n); err != nil {
				unix.Close(fd)
				return err
			}
		}
	}
	unix.Close(fd)
	err = unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// RemoveEmptyDirs removes rel if it holds nothing but directories,
// never following a symlink. It reports false, removing nothing more, as
// soon as it finds anything else (subdirectories emptied before that stay
// removed).
func (d Dir) RemoveEmptyDirs(rel string) (bool, error) {
	p, name, err := d.Parent(rel)
	if err != nil {
		return false, &PathError{Op: "remove", Path: rel, Err: err}
	}
	defer p.Close()
	ok, err := removeEmptyDirsAt(int(p), name)
	if err != nil {
		return false, &PathError{Op: "remove", Path: rel, Err: err}
	}
	return ok, nil
}

func removeEmptyDirsAt(dir int, name string) (bool, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	names, err := ReadNames(fd)
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

// ReadNames lists the entries of an open directory (without . and ..)
// from its start.
func ReadNames(fd int) ([]string, error) {
	if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
		return nil, err
	}
	buf := make([]byte, 8<<10)
	var names []string
	for {
		n, err := unix.ReadDirent(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}
