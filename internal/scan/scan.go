// Package scan walks a home and reports the selected paths with their
// metadata, in archive.ComparePaths order, without following symlinks.
package scan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/selector"
)

// ReservedPrefix names homesnap's own working directories at the home root
// (restore staging); a walk never reports them.
const ReservedPrefix = ".homesnap-"

// Skipped is called for paths the walk leaves out (sockets, devices, paths
// that vanished while walking) so that callers can log them.
type Skipped func(rel, why string)

// Walk calls fn for every selected path below home, parents first, in
// archive.ComparePaths order. Directories that are not selected themselves
// but lead to selected paths are reported with Implied set, just before
// their first selected descendant. Paths that vanish during the walk are
// skipped; any other error names the path and stops the walk.
func Walk(ctx context.Context, home string, sel *selector.Selector, skipped Skipped, fn func(*archive.Entry) error) error {
	if skipped == nil {
		skipped = func(string, string) {}
	}
	fd, err := unix.Open(home, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open home %s: %w", home, err)
	}
	w := &walker{ctx: ctx, home: home, sel: sel, skipped: skipped, fn: fn}
	return w.dir(fd, "", false)
}

type walker struct {
	ctx     context.Context
	home    string
	sel     *selector.Selector
	skipped Skipped
	fn      func(*archive.Entry) error
	pending []*archive.Entry // implied ancestors not yet reported
}

// dir walks the directory open as fd (closing it), whose path is rel.
func (w *walker) dir(fd int, rel string, selected bool) error {
	f := os.NewFile(uintptr(fd), filepath.Join(w.home, rel))
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			w.skipped(rel, "vanished")
			return nil
		}
		return fmt.Errorf("read directory %s: %w", f.Name(), err)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		if rel == "" && strings.HasPrefix(name, ReservedPrefix) {
			continue
		}
		if err := w.child(fd, rel, name, selected); err != nil {
			return err
		}
	}
	if !selected && len(w.pending) > 0 && w.pending[len(w.pending)-1].Path == rel {
		w.pending = w.pending[:len(w.pending)-1]
	}
	return nil
}

func (w *walker) child(dirfd int, dirRel, name string, parentSelected bool) error {
	rel := name
	if dirRel != "" {
		rel = dirRel + "/" + name
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			w.skipped(rel, "vanished")
			return nil
		}
		return fmt.Errorf("stat %s: %w", filepath.Join(w.home, rel), err)
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	selected := w.sel.SelectedIn(parentSelected, rel)
	if !selected && !(isDir && w.sel.Enter(rel)) {
		return nil
	}
	e := FromStat(rel, &st)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG, unix.S_IFDIR:
	case unix.S_IFLNK:
		target, err := readlinkat(dirfd, name)
		if errors.Is(err, unix.ENOENT) {
			w.skipped(rel, "vanished")
			return nil
		}
		if err != nil {
			return fmt.Errorf("read symlink %s: %w", filepath.Join(w.home, rel), err)
		}
		e.Link = target
	default:
		w.skipped(rel, "not a regular file, directory or symlink")
		return nil
	}
	if selected {
		if err := w.flushPending(); err != nil {
			return err
		}
		if err := w.fn(e); err != nil {
			return err
		}
	} else {
		e.Implied = true
		w.pending = append(w.pending, e)
	}
	if !isDir {
		return nil
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			w.skipped(rel, "vanished")
			return nil
		}
		return fmt.Errorf("open directory %s: %w", filepath.Join(w.home, rel), err)
	}
	return w.dir(fd, rel, selected)
}

// flushPending reports the implied ancestors of the path about to be
// reported.
func (w *walker) flushPending() error {
	for _, p := range w.pending {
		if err := w.fn(p); err != nil {
			return err
		}
	}
	w.pending = w.pending[:0]
	return nil
}

func readlinkat(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// FromStat builds an entry's metadata from a stat result.
func FromStat(rel string, st *unix.Stat_t) *archive.Entry {
	e := &archive.Entry{
		Path:  rel,
		Mode:  Mode(st.Mode),
		UID:   int(st.Uid),
		GID:   int(st.Gid),
		MTime: st.Mtim.Nano(),
		CTime: st.Ctim.Nano(),
		Inode: st.Ino,
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		e.Type = archive.TypeDir
	case unix.S_IFLNK:
		e.Type = archive.TypeSymlink
	default:
		e.Type = archive.TypeFile
		e.Size = st.Size
	}
	return e
}

// Mode converts the permission and special bits of a raw st_mode.
func Mode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
