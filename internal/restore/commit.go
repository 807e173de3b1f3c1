package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/scan"
)

// The commit moves the staged snapshot into the home. The home is usually a
// volume mount point and cannot itself be swapped, so the swap is per path:
// selected paths absent from the snapshot, and paths in the way, move into
// the displaced directory; staged paths move into place, whole subtrees at
// once where the home has nothing yet. Only selected paths are touched.
//
// Everything is decided and prepared before the first move (the plan):
// the displaced directory and every parent directory its paths need exist
// already, so neither the moves nor their rollback create an inode or
// delete one. A rollback only renames back and restores metadata.

type actionKind uint8

const (
	actDisplace actionKind = iota // move a home path into the displaced directory
	actMoveIn                     // move a staged path into the home
	actMeta                       // set a home path's owner, mode and mtime
)

// action is one step of the commit. A restore over a populated home may
// plan one per path, so it stays small.
type action struct {
	kind actionKind
	done bool
	rel  string
	meta *metaStep // actMeta only
}

type metaStep struct {
	e   *archive.Entry // the metadata to set
	old unix.Stat_t    // what it was, for the rollback
}

func metaAction(rel string, e *archive.Entry) *action {
	return &action{kind: actMeta, rel: rel, meta: &metaStep{e: e}}
}

// plan is the commit, in execution order: removals first (so that a
// directory the snapshot replaces by a file is empty by then), then the
// replacements in manifest order, then the metadata of directories the
// removals touched.
type plan struct {
	remove, replace, tail []*action
}

// displace plans moving a home path aside, creating its parents in the
// displaced directory now.
func (r *restorer) displace(list *[]*action, rel string) error {
	*list = append(*list, &action{kind: actDisplace, rel: rel})
	if r.o.DryRun {
		return nil
	}
	if r.disp < 0 {
		base := displacedPrefix + r.id + "-" + time.Now().UTC().Format("20060102T150405.000Z")
		r.dispName = base
		err := unix.Mkdirat(r.home, r.dispName, 0o700)
		for i := 2; errors.Is(err, unix.EEXIST) && i < 100; i++ {
			r.dispName = fmt.Sprintf("%s-%d", base, i)
			err = unix.Mkdirat(r.home, r.dispName, 0o700)
		}
		if err != nil {
			return fmt.Errorf("create %s: %w (is there space?)", r.abs(r.dispName), err)
		}
		fd, err := openDirAt(r.home, r.dispName)
		if err != nil {
			return err
		}
		r.disp = fd
		if r.o.Chown != nil { // on the descriptor: its name is in the home's user's hands
			if err := unix.Fchown(fd, r.o.Chown.UID, r.o.Chown.GID); err != nil {
				return fmt.Errorf("chown %s: %w", r.abs(r.dispName), err)
			}
		}
	}
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		p := strings.Join(parts[:i], "/")
		err := unix.Mkdirat(r.disp, p, 0o700)
		if err == nil {
			err = r.chownOurs(r.disp, p)
		}
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("prepare %s: %w (is there space?)", r.abs(r.dispName+"/"+rel), err)
		}
	}
	return nil
}

// chownOurs gives a directory the restore made to --chown's ids, so that
// the home's user can reach the paths kept in it.
func (r *restorer) chownOurs(dir int, rel string) error {
	if r.o.Chown == nil {
		return nil
	}
	return homefs.Dir(dir).Chown(rel, r.o.Chown.UID, r.o.Chown.GID)
}

// findExtras plans the removal of the selected paths of the home that the
// snapshot does not have (files deleted before the snapshot was taken). It
// walks the home with what the restore may remove and merges that with the
// sorted manifest. A directory that holds nothing else moves aside whole;
// one that still holds unselected paths (a workspace) is kept.
func (r *restorer) findExtras(ctx context.Context) error {
	if r.home < 0 {
		return nil
	}
	pr, err := r.openPlan(ctx)
	if err != nil {
		return err
	}
	defer pr.Close()
	var extras []*archive.Entry
	var present int64
	var dirs []*archive.Entry // manifest directories above the walk's position
	cur, done := (*archive.Entry)(nil), false
	advance := func() error {
		e, err := pr.Next(ctx)
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
	touched := map[string]*archive.Entry{}
	err = scan.Walk(ctx, r.o.Home, pr.Filter.Remove, nil, func(e *archive.Entry) error {
		for len(dirs) > 0 && !strings.HasPrefix(e.Path, dirs[len(dirs)-1].Path+"/") {
			dirs = dirs[:len(dirs)-1]
		}
		if !e.Implied {
			present++
		}
		for !done && archive.ComparePaths(cur.Path, e.Path) < 0 {
			if err := advance(); err != nil {
				return err
			}
		}
		if !done && cur.Path == e.Path {
			if cur.Type == archive.TypeDir {
				dirs = append(dirs, cur)
			}
			return nil
		}
		if e.Implied {
			return nil
		}
		extras = append(extras, e)
		if len(dirs) > 0 && dirs[len(dirs)-1].Path == archive.Parent(e.Path) && !dirs[len(dirs)-1].Implied {
			touched[archive.Parent(e.Path)] = dirs[len(dirs)-1]
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n := int64(len(extras)); n > 0 && !r.o.Force && 2*n > present {
		return &RemoveMostError{Snapshot: r.id, Removed: n, Present: present}
	}
	r.removeSet = map[string]bool{}
	whole := "" // a directory moved aside with everything below it
	for _, e := range extras {
		if whole != "" && strings.HasPrefix(e.Path, whole) {
			r.res.Removed++
			continue
		}
		if e.Type == archive.TypeDir {
			keep, err := r.holdsUnselected(e.Path, pr.Filter)
			if err != nil {
				return err
			}
			if keep {
				continue // its selected children are removed one by one
			}
			whole = e.Path + "/"
		}
		r.res.Removed++
		r.change(ChangeRemove, e.Path, 0)
		r.removeSet[e.Path] = true
		if err := r.displace(&r.plan.remove, e.Path); err != nil {
			return err
		}
	}
	for p, e := range touched {
		r.plan.tail = append(r.plan.tail, metaAction(p, e))
	}
	return nil
}

// commit executes the plan; on error it undoes every step taken.
func (r *restorer) commit() error {
	steps := make([]*action, 0, len(r.plan.remove)+len(r.plan.replace)+len(r.plan.tail))
	steps = append(append(append(steps, r.plan.remove...), r.plan.replace...), r.plan.tail...)
	if len(steps) == 0 {
		return nil
	}
	j, err := r.openCommitLog()
	if err != nil {
		return fmt.Errorf("%w; nothing was changed in the home", err)
	}
	defer j.f.Close()
	for _, a := range steps {
		if r.s.hooks.kill != nil && r.s.hooks.kill(a) {
			return errSimulatedKill
		}
		if r.s.hooks.beforeAction != nil {
			if err := r.s.hooks.beforeAction(a); err != nil {
				return r.rollback(steps, err)
			}
		}
		if err := r.do(a, j); err != nil {
			return r.rollback(steps, err)
		}
	}
	return nil
}

// errSimulatedKill is returned when a test's kill hook stops a commit.
var errSimulatedKill = errors.New("simulated kill")

// do takes one step, logging it first.
func (r *restorer) do(a *action, j *commitLog) error {
	if a.kind == actMeta {
		if err := homefs.Dir(r.home).Lstat(a.rel, &a.meta.old); err != nil {
			return fmt.Errorf("set metadata of %s: %w", r.abs(a.rel), err)
		}
	}
	if err := j.record(a); err != nil {
		return err
	}
	switch a.kind {
	case actDisplace:
		if err := r.rename(r.home, a.rel, r.disp, a.rel); err != nil {
			return fmt.Errorf("move %s aside: %w", r.abs(a.rel), err)
		}
	case actMoveIn:
		if err := r.rename(r.tree, a.rel, r.home, a.rel); err != nil {
			return fmt.Errorf("move %s into place: %w", r.abs(a.rel), err)
		}
	case actMeta:
		a.done = true // a partial change is undone too
		if err := r.setHomeMeta(a.rel, a.meta.e); err != nil {
			return fmt.Errorf("set metadata of %s: %w", r.abs(a.rel), err)
		}
		return nil
	}
	a.done = true
	return nil
}

func (r *restorer) undo(a *action) error {
	switch a.kind {
	case actDisplace:
		return r.rename(r.disp, a.rel, r.home, a.rel)
	case actMoveIn:
		return r.rename(r.home, a.rel, r.tree, a.rel)
	}
	st := &a.meta.old
	m := homefs.Meta{Mode: func(bool) uint32 { return uint32(st.Mode & 0o7777) }, Times: []unix.Timespec{st.Atim, st.Mtim}}
	if r.root {
		m.Owner = &homefs.Owner{UID: int(st.Uid), GID: int(st.Gid)}
	}
	return r.leaveHardLinked(a.rel, homefs.Dir(r.home).SetMeta(a.rel, m))
}

// leaveHardLinked turns a metadata change refused because the path became
// a hard link (the home's user replaced it since it was changed) into a
// warning: that path is no longer what the restore changed, and it is
// left alone rather than failing the rollback.
func (r *restorer) leaveHardLinked(rel string, err error) error {
	if errors.Is(err, homefs.ErrHardLinked) {
		r.o.Log.Warn().Str("path", r.abs(rel)).Err(err).Msg("left this path's owner, mode and times alone: it was replaced by a hard link since the restore changed it")
		return nil
	}
	return err
}

// setHomeMeta sets a home path's metadata in the commit. The home is
// live (a partial restore into a running controller): the change is
// made on the path opened beneath the home with no symlink, so a
// directory swapped for a link meanwhile cannot redirect a root chown or
// chmod, and it is refused on a hard-linked inode (homefs.ErrHardLinked),
// which could be a file outside the home.
func (r *restorer) setHomeMeta(rel string, e *archive.Entry) error {
	m := homefs.Meta{
		Mode:  func(bool) uint32 { return unixMode(e.Mode) },
		Times: []unix.Timespec{unix.NsecToTimespec(e.MTime), unix.NsecToTimespec(e.MTime)},
	}
	if uid, gid, ok := r.owner(e); ok {
		m.Owner = &homefs.Owner{UID: uid, GID: gid}
	}
	err := homefs.Dir(r.home).SetMeta(rel, m)
	if errors.Is(err, homefs.ErrHardLinked) {
		return fmt.Errorf("%w; it was replaced since the restore compared it (by the home's user?): nothing of it was changed; restore again, which replaces the name by a fresh file", err)
	}
	return err
}

func (r *restorer) rename(fromDir int, from string, toDir int, to string) error {
	if r.s.hooks.rename != nil {
		return r.s.hooks.rename(fromDir, from, toDir, to)
	}
	// Both parents opened beneath their directories: only the last
	// component of either path is resolved by the rename itself.
	return homefs.Dir(fromDir).Rename(from, homefs.Dir(toDir), to)
}

// rollback undoes the steps taken, newest first.
func (r *restorer) rollback(steps []*action, cause error) error {
	var errs []error
	for i := len(steps) - 1; i >= 0; i-- {
		if a := steps[i]; a.done {
			if err := r.undo(a); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", a.rel, err))
			}
		}
	}
	if len(errs) == 0 {
		return fmt.Errorf("%w; the home was left as it was", cause)
	}
	re := &rollbackError{cause: cause, undo: errors.Join(errs...), stage: r.abs(r.stageDir) + "/tree"}
	if r.disp >= 0 {
		re.displaced = r.abs(r.dispName)
	}
	return re
}

// rollbackError is a commit that failed and could not be fully undone:
// nothing is deleted, and the message says where every path is.
type rollbackError struct {
	cause, undo      error
	stage, displaced string
}

func (e *rollbackError) Error() string {
	disp := "none were moved aside"
	if e.displaced != "" {
		disp = "the home's paths moved aside are in " + e.displaced
	}
	return fmt.Sprintf("%v; rolling back also failed (%v): the home is partly restored; the snapshot's staged paths are in %s and %s (same relative paths); nothing was deleted — restore again once the cause is fixed, or move them back by hand",
		e.cause, e.undo, e.stage, disp)
}

func (e *rollbackError) Unwrap() []error { return []error{e.cause, ErrRollbackFailed} }
