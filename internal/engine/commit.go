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
	if err := r.removeExtra(ctx, &j); err != nil {
		return err
	}
	var created []*archive.Entry // directories whose metadata to apply
	skipBelow := ""              // a subtree already moved in whole
	for _, e := range r.plan.entries {
		if skipBelow != "" && strings.HasPrefix(e.Path, skipBelow) {
			if e.Type == archive.TypeDir {
				created = append(created, e)
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
				created = append(created, e)
			}
			continue
		}
		if beforeMove != nil {
			if err := beforeMove(e.Path); err != nil {
				return err
			}
		}
		if exists {
			if err := r.displace(&j, e.Path); err != nil {
				return err
			}
		}
		if err := j.rename(r.staged(e.Path), target); err != nil {
			return fmt.Errorf("move %s into place: %w", target, err)
		}
		if e.Type == archive.TypeDir {
			created = append(created, e)
			skipBelow = e.Path + "/"
		}
	}
	// Directory metadata last, deepest first: moving entries in changed the
	// directories' mtimes, and a read-only mode would have blocked the moves.
	for i := len(created) - 1; i >= 0; i-- {
		e := created[i]
		if err := r.setMeta(r.target(e.Path), e, false); err != nil {
			return fmt.Errorf("set metadata of %s: %w", r.target(e.Path), err)
		}
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
func (r *restorer) removeExtra(ctx context.Context, j *journal) error {
	sel, err := selector.New(r.plan.header.Selection)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", r.plan.id, err)
	}
	var extra []*archive.Entry
	entries := r.plan.entries
	err = scan.Walk(ctx, r.o.Home, sel, nil, func(e *archive.Entry) error {
		for len(entries) > 0 && archive.ComparePaths(entries[0].Path, e.Path) < 0 {
			entries = entries[1:]
		}
		if len(entries) > 0 && entries[0].Path == e.Path {
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
