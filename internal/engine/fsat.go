package engine

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/scan"
)

// A restore works relative to directory descriptors (the home, the staging
// tree, the displaced directory): no system call ever sees the home's
// absolute path joined with a snapshot path, so every path a snapshot
// accepted (up to PATH_MAX relative to the home) can be staged and moved,
// however deep the home itself is mounted.

// openDirAt opens a directory beneath dir with no symlink on the way.
func openDirAt(dir int, rel string) (int, error) {
	fd, err := homefs.Dir(dir).OpenRaw(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", rel, err)
	}
	return fd, nil
}

// openBeneath opens a directory of the home with no symlink on the way.
func openBeneath(dir int, rel string) (int, error) {
	return homefs.Dir(dir).OpenRaw(rel, unix.O_RDONLY|unix.O_DIRECTORY)
}

// holdsUnselected reports whether the home directory rel holds a path the
// restore may not remove.
func (r *restorer) holdsUnselected(rel string, f *entryFilter) (bool, error) {
	fd, err := openBeneath(r.home, rel)
	if err != nil {
		return false, fmt.Errorf("inspect %s: %w", r.abs(rel), err)
	}
	dir := os.NewFile(uintptr(fd), r.abs(rel))
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", dir.Name(), err)
	}
	for _, name := range names {
		child := rel + "/" + name
		if !f.remove.Selected(child) {
			return true, nil
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return false, fmt.Errorf("inspect %s: %w", r.abs(child), err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if held, err := r.holdsUnselected(child, f); err != nil || held {
				return held, err
			}
		}
	}
	return false, nil
}

// checkRemovable refuses to replace a home directory that holds paths the
// restore may not remove (a workspace below a job the snapshot has as a
// file).
func (r *restorer) checkRemovable(rel string) error {
	held, err := r.holdsUnselected(rel, r.filter)
	if err != nil {
		return err
	}
	if held {
		return fmt.Errorf("%w: the snapshot has %s as a file, but in the home it is a directory holding paths outside the selection; nothing was changed (move them away first)", ErrInTheWay, r.abs(rel))
	}
	return nil
}

// overlayFS is what BeforeCommit sees: the home as it will be after the
// commit. A path comes from the staging tree when the restore writes it,
// is absent when the restore removes it, and otherwise is the home's own
// (unchanged files, and unselected paths, which the restore never
// touches). ReadDir merges a directory's staged and home entries; a
// directory opened with Open lists only one side. Both sides are read
// through homefs.FS: no symlink is followed, nothing but regular files and
// directories is opened.
type overlayFS struct {
	home, tree homefs.Dir
	removed    map[string]bool
}

func (r *restorer) overlay() fs.FS {
	return &overlayFS{home: homefs.Dir(r.home), tree: homefs.Dir(r.tree), removed: r.removeSet}
}

func (o *overlayFS) gone(name string) bool {
	for p := name; p != "." && p != ""; p = path.Dir(p) {
		if o.removed[p] {
			return true
		}
	}
	return false
}

func (o *overlayFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if o.gone(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	var staged, home unix.Stat_t
	if name != "." && o.tree.Lstat(name, &staged) == nil {
		if o.home.Lstat(name, &home) != nil || !isDir(&staged) || !isDir(&home) {
			return homefs.FS(o.tree).Open(name)
		}
	}
	return homefs.FS(o.home).Open(name)
}

func isDir(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFDIR }

func (o *overlayFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) || o.gone(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	byName := map[string]fs.DirEntry{}
	found := false
	for _, root := range []homefs.Dir{o.home, o.tree} { // staged entries win
		list, err := fs.ReadDir(homefs.FS(root), name)
		if err != nil {
			continue
		}
		found = true
		for _, d := range list {
			child := path.Join(name, d.Name())
			if name == "." && strings.HasPrefix(d.Name(), scan.ReservedPrefix) || o.removed[child] {
				continue
			}
			byName[d.Name()] = d
		}
	}
	if !found {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	out := make([]fs.DirEntry, 0, len(byName))
	for _, d := range byName {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}
