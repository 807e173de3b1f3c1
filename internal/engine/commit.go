package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/selector"
)

// journal records the changes a commit made to the home so that a failure
// part-way can undo them in reverse order.
type journal struct {
	undo []func() error
}

func (j *journal) rename(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	j.undo = append(j.undo, func() error { return os.Rename(to, from) })
	return nil
}

// rmdir removes an empty directory; undoing recreates it as it was.
func (j *journal) rmdir(p string) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return err
	}
	if err := unix.Rmdir(p); err != nil {
		return err
	}
	j.undo = append(j.undo, func() error {
		if err := unix.Mkdir(p, st.Mode&0o7777); err != nil {
			return err
		}
		if err := unix.Lchown(p, int(st.Uid), int(st.Gid)); err != nil && !errors.Is(err, unix.EPERM) {
			return err
		}
		if err := unix.Chmod(p, st.Mode&0o7777); err != nil {
			return err
		}
		return unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
	})
	return nil
}

func (j *journal) rollback() error {
	var errs []error
	for i := len(j.undo) - 1; i >= 0; i-- {
		errs = append(errs, j.undo[i]())
	}
	return errors.Join(errs...)
}

// commit moves the staged snapshot into the home. The home is usually a
// volume mount point and cannot itself be swapped, so the swap is per path:
// selected paths absent from the snapshot, and paths in the way, move into
// the staging area's "old" directory; staged paths move into place, whole
// subtrees at once where the home has nothing yet. Only selected paths are
// touched. On error every move is undone.
func (r *restorer) commit(ctx context.Context) (err error) {
	var j journal
	defer func() {
		if err != nil {
			if rerr := j.rollback(); rerr != nil {
				err = fmt.Errorf("%w; rolling back also failed (%v): the displaced paths are in %s", err, rerr, filepath.Join(r.stage, "old"))
				return
			}
			err = fmt.Errorf("%w; the home was left as it was", err)
		}
	}()
	touched := map[string]bool{} // directories that rolling back moves paths out of or into
	if err := r.removeExtra(ctx, &j, touched); err != nil {
		return err
	}
	pr, err := openPlan(ctx, r.o.Store, r.id)
	if err != nil {
		return err
	}
	defer pr.Close()
	// Directory metadata is applied when the manifest leaves a directory:
	// everything below it has been moved in by then, children before their
	// parents. Moving entries in changes the directories' mtimes, and a
	// read-only mode would block the moves. open holds the directories
	// whose metadata is still to apply, innermost last.
	var open []openDir
	closeDirs := func(next string) error {
		for len(open) > 0 {
			d := open[len(open)-1]
			if next != "" && strings.HasPrefix(next, d.e.Path+"/") {
				break
			}
			open = open[:len(open)-1]
			if err := r.setDirMeta(&j, d, touched); err != nil {
				return err
			}
		}
		return nil
	}
	skipBelow := "" // a subtree already moved in whole
	for {
		e, err := pr.next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := closeDirs(e.Path); err != nil {
			return err
		}
		if skipBelow != "" && strings.HasPrefix(e.Path, skipBelow) {
			if e.Type == archive.TypeDir {
				open = append(open, openDir{e: e, inner: true})
			}
			continue
		}
		skipBelow = ""
		target := r.target(e.Path)
		var st unix.Stat_t
		lerr := unix.Lstat(target, &st)
		exists := lerr == nil
		if lerr != nil && !errors.Is(lerr, unix.ENOENT) {
			return fmt.Errorf("inspect %s: %w", target, lerr)
		}
		if e.Type == archive.TypeDir && exists && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if !e.Implied {
				open = append(open, openDir{e: e})
			}
			continue
		}
		if beforeMove != nil {
			if err := beforeMove(e.Path); err != nil {
				return err
			}
		}
		touched[archive.Parent(e.Path)] = true
		if exists {
			if err := r.displace(&j, e.Path); err != nil {
				return err
			}
		}
		if err := j.rename(r.staged(e.Path), target); err != nil {
			return fmt.Errorf("move %s into place: %w", target, err)
		}
		if e.Type == archive.TypeDir {
			touched[e.Path] = true // rolling back moves it out: it must stay writable
			open = append(open, openDir{e: e})
			skipBelow = e.Path + "/"
		}
	}
	return closeDirs("")
}

// openDir is a directory whose metadata commit applies once the manifest
// has left it. inner marks one inside a subtree moved in whole.
type openDir struct {
	e     *archive.Entry
	inner bool
}

// setDirMeta applies a directory's metadata. Rolling back restores the
// previous mode and owner where that matters: for directories of the home
// (the home is left as it was) and for directories that rolling back moves
// paths through. A directory inside a subtree moved in whole goes back to
// the staging area with it and only needs to stay removable. Only changed
// directories are journaled, so the journal grows with the drift, not with
// the tree.
func (r *restorer) setDirMeta(j *journal, d openDir, touched map[string]bool) error {
	p := r.target(d.e.Path)
	isTouched := touched[d.e.Path]
	delete(touched, d.e.Path)
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return fmt.Errorf("set metadata of %s: %w", p, err)
	}
	changed := uint32(st.Mode&0o7777) != unixMode(d.e.Mode) || (r.root && (int(st.Uid) != d.e.UID || int(st.Gid) != d.e.GID))
	if changed && (!d.inner || isTouched || d.e.Mode.Perm()&0o700 != 0o700) {
		j.undo = append(j.undo, func() error {
			if r.root {
				if err := unix.Lchown(p, int(st.Uid), int(st.Gid)); err != nil {
					return err
				}
			}
			if err := unix.Chmod(p, uint32(st.Mode&0o7777)); err != nil {
				return err
			}
			return unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
		})
	}
	if err := r.setMeta(p, d.e, false); err != nil {
		return fmt.Errorf("set metadata of %s: %w", p, err)
	}
	return nil
}

// beforeMove lets tests fail a commit part-way.
var beforeMove func(rel string) error

func (r *restorer) target(rel string) string {
	return filepath.Join(r.o.Home, filepath.FromSlash(rel))
}

// displace moves a home path out of the way into the staging area.
func (r *restorer) displace(j *journal, rel string) error {
	to := filepath.Join(r.stage, "old", filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	if err := j.rename(r.target(rel), to); err != nil {
		return fmt.Errorf("move %s aside: %w", r.target(rel), err)
	}
	return nil
}

// removeExtra displaces the selected paths of the home that the snapshot
// does not have (files deleted before the snapshot was taken). It walks the
// home with the snapshot's own selection and merges that with the sorted
// manifest. A directory that still holds unselected paths (a workspace) is
// kept.
func (r *restorer) removeExtra(ctx context.Context, j *journal, touched map[string]bool) error {
	sel, err := selector.New(r.header.Selection)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", r.id, err)
	}
	pr, err := openPlan(ctx, r.o.Store, r.id)
	if err != nil {
		return err
	}
	defer pr.Close()
	var extra []*archive.Entry
	cur, done := (*archive.Entry)(nil), false // the manifest's next entry
	advance := func() error {
		e, err := pr.next(ctx)
		if errors.Is(err, io.EOF) {
			cur, done = nil, true
			return nil
		}
		cur = e
		return err
	}
	if err := advance(); err != nil {
		return err
	}
	err = scan.Walk(ctx, r.o.Home, sel, nil, func(e *archive.Entry) error {
		for !done && archive.ComparePaths(cur.Path, e.Path) < 0 {
			if err := advance(); err != nil {
				return err
			}
		}
		if !done && cur.Path == e.Path {
			return nil
		}
		if !e.Implied {
			extra = append(extra, e)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Deepest first, so a directory is empty of selected paths when it is
	// considered.
	for i := len(extra) - 1; i >= 0; i-- {
		e := extra[i]
		touched[archive.Parent(e.Path)] = true
		if e.Type == archive.TypeDir {
			// Its selected children are gone; keep it if others remain.
			empty, err := isEmptyDir(r.target(e.Path))
			if err != nil {
				return err
			}
			if empty {
				if err := j.rmdir(r.target(e.Path)); err != nil {
					return fmt.Errorf("remove %s: %w", r.target(e.Path), err)
				}
			}
			continue
		}
		if err := r.displace(j, e.Path); err != nil {
			return err
		}
	}
	return nil
}

func isEmptyDir(p string) (bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if _, err = f.Readdirnames(1); errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}
