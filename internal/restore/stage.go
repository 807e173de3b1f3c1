package restore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/fetch"
)

// stageDir is a directory of the manifest while the staging pass is inside
// it.
type stageDir struct {
	e       *archive.Entry
	inHome  bool // the home has it as a directory: children are compared one by one
	differs bool // its metadata in the home differs from the snapshot's
	staged  bool // created in the staging tree
	touched bool // a child is moved in or out, which changes its mtime
	whole   bool // moved in as one subtree, with every descendant
	inner   bool // below such a subtree's top: its metadata is set in the staging tree (innerDirs)
}

// stage makes one pass over the manifest: it decides for every entry what
// the commit does (the plan), and writes into the staging tree whatever
// the home does not already have: directories, symlinks and empty files as
// their entries come, file contents from ranged reads that a bounded pool
// of workers runs while the manifest is still being read. Within one
// archive the manifest's order is the archive's order (archives are
// written in walk order), so each archive has one open run that grows
// until the next entry is too far or the run too long, and is then handed
// to the workers.
func (r *restorer) stage(ctx context.Context) error {
	pr, err := r.openPlan(ctx)
	if err != nil {
		return err
	}
	defer pr.Close()
	r.filter = pr.Filter
	defer func() {
		r.res.ModesDropped, r.res.ModesExample = pr.Filter.Dropped, pr.Filter.Example
		if f := pr.Filter; f.Skipped > 0 && len(r.o.Include) == 0 && len(r.o.Exclude) == 0 {
			r.o.Log.Warn().Int64("paths", f.Skipped).Str("example", f.SkippedExample).Str("snapshot_preset", pr.Header().Selection.Preset).
				Msg("the snapshot holds paths outside this restore's selection; they were not restored (give restore the selection the snapshot was taken with: --preset, --select-include, --select-exclude)")
		}
	}()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(sctx)
	workers := fetch.NewWorkers(r.o.Jobs)
	g.SetLimit(workers.InFlight())
	dirs := newInnerDirs(r)
	serr := r.stageEntries(gctx, pr, dirs, func(rn *fetch.Run) {
		g.Go(func() error {
			if err := r.fetch.FetchWith(gctx, workers, rn); err != nil {
				return err
			}
			dirs.runWritten(rn.Seq())
			return nil
		})
	})
	if serr != nil {
		cancel() // stop the workers before the staging area is removed
	}
	werr := g.Wait()
	switch {
	case serr != nil && !errors.Is(serr, context.Canceled):
		return serr
	case werr != nil:
		return werr
	case serr != nil:
		return serr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return dirs.applyAll() // every run is written
}

func (r *restorer) stageEntries(ctx context.Context, pr *fetch.Plan, dirs *innerDirs, dispatch func(*fetch.Run)) error {
	st := &stager{r: r, runs: fetch.NewRunBuilder(dispatch), dirs: dirs}
	for e, err := range pr.All(ctx) {
		if err != nil {
			return err
		}
		if err := st.entry(e); err != nil {
			return err
		}
		if dirs.full() {
			st.runs.Flush() // the runs the queued directories wait for
			err = dirs.drain(ctx)
		} else {
			err = dirs.apply()
		}
		if err != nil {
			return err
		}
		if r.res.Entries%4096 == 0 && ctx.Err() != nil {
			return ctx.Err() // a worker failed
		}
	}
	st.leave("")
	st.runs.Flush()
	return nil
}

// stager is the state of the staging pass.
type stager struct {
	r     *restorer
	stack []*stageDir
	runs  *fetch.RunBuilder
	dirs  *innerDirs
}

// leave closes the directories that do not contain next ("" closes all).
func (s *stager) leave(next string) {
	for len(s.stack) > 0 {
		d := s.stack[len(s.stack)-1]
		if next != "" && strings.HasPrefix(next, d.e.Path+"/") {
			return
		}
		s.stack = s.stack[:len(s.stack)-1]
		if d.inner && !s.r.o.DryRun {
			s.dirs.add(d.e, s.runs.Made())
		}
		if d.inHome && !d.e.Implied && (d.differs || d.touched) {
			// After everything below it has moved: moves change its mtime,
			// and a read-only mode would block them.
			s.r.plan.replace = append(s.r.plan.replace, metaAction(d.e.Path, d.e))
			if d.differs {
				s.r.res.MetaFixed++
				s.r.change(ChangeMeta, d.e.Path, 0)
			}
		} else if d.inHome {
			s.r.res.Unchanged++
		}
	}
}

func (s *stager) entry(e *archive.Entry) error {
	r := s.r
	s.leave(e.Path)
	r.res.Entries++
	if e.Type == archive.TypeFile {
		r.res.Files++
		r.res.Bytes += e.Size
	}
	var parent *stageDir
	if len(s.stack) > 0 {
		parent = s.stack[len(s.stack)-1]
	}
	if parent != nil && parent.whole { // the home has nothing here
		r.change(ChangeWrite, e.Path, e.Size)
		if e.Type == archive.TypeDir {
			s.stack = append(s.stack, &stageDir{e: e, staged: true, whole: true, inner: true})
		}
		return s.write(e)
	}
	var st unix.Stat_t
	exists, err := r.lstat(e.Path, &st)
	if err != nil {
		return err
	}
	isDir := exists && st.Mode&unix.S_IFMT == unix.S_IFDIR
	switch {
	case e.Type == archive.TypeDir && isDir:
		s.stack = append(s.stack, &stageDir{e: e, inHome: true, differs: !e.Implied && !r.sameMeta(&st, e)})
		return nil
	case e.Type == archive.TypeDir && e.Implied && exists:
		return fmt.Errorf("%w: %s is not selected and not a directory, but the snapshot has selected paths below it; nothing was changed (move it away and restore again)", ErrInTheWay, r.abs(e.Path))
	case exists && !isDir && r.s.delta && r.sameEntry(&st, e):
		r.res.Unchanged++
		return nil
	case exists && !isDir && r.s.delta && e.Type == archive.TypeFile && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == e.Size && st.Nlink > 1:
		// Its metadata could be fixed only on an inode another name shares,
		// maybe a file outside the home: the name is replaced instead
		// (below), and the old one kept with what the restore displaces.
		r.o.Log.Warn().Str("path", r.abs(e.Path)).Uint64("links", uint64(st.Nlink)).
			Msg("replacing a hard-linked file by a fresh copy rather than changing an inode other names share")
	case exists && !isDir && r.s.delta && e.Type == archive.TypeFile && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == e.Size:
		same, err := r.sameContent(e)
		if err != nil {
			return err
		}
		if same {
			r.plan.replace = append(r.plan.replace, metaAction(e.Path, e))
			r.res.MetaFixed++
			r.change(ChangeMeta, e.Path, 0)
			return nil
		}
	}
	// The snapshot's version replaces whatever the home has.
	if isDir {
		// A directory becomes a file or symlink: its selected content is
		// removed with the extras; anything else must not be lost.
		if err := r.checkRemovable(e.Path); err != nil {
			return err
		}
	}
	for _, d := range s.stack { // parents the home already has
		if !d.staged && !r.o.DryRun {
			if err := unix.Mkdirat(r.tree, d.e.Path, 0o700); err != nil {
				return fmt.Errorf("stage %s: %w", d.e.Path, err)
			}
		}
		d.staged = true
	}
	if parent != nil {
		parent.touched = true
	}
	if exists {
		if err := r.displace(&r.plan.replace, e.Path); err != nil {
			return err
		}
		r.change(ChangeReplace, e.Path, e.Size)
	} else {
		r.change(ChangeWrite, e.Path, e.Size)
	}
	r.plan.replace = append(r.plan.replace, &action{kind: actMoveIn, rel: e.Path})
	if e.Type == archive.TypeDir {
		// Its metadata once it is in place; inner directories get theirs
		// in the staging tree (innerDirs).
		r.plan.replace = append(r.plan.replace, metaAction(e.Path, e))
		s.stack = append(s.stack, &stageDir{e: e, staged: true, whole: true})
	}
	return s.write(e)
}

// write creates e in the staging tree, or queues its bytes for a worker.
func (s *stager) write(e *archive.Entry) error {
	r := s.r
	r.res.Written++
	r.res.WrittenBytes += e.Size
	if e.HasData() {
		r.res.Fetched++
	}
	if r.o.DryRun {
		return nil
	}
	fetch.Planned(r.o.Progress, e)
	var err error
	switch {
	case e.Type == archive.TypeDir:
		err = unix.Mkdirat(r.tree, e.Path, 0o700) // final modes once everything is in
	case e.Type == archive.TypeSymlink:
		if err = unix.Symlinkat(e.Link, r.tree, e.Path); err == nil {
			err = r.setMeta(r.tree, e.Path, e, true)
		}
	case !e.HasData():
		err = r.writeFile(e.Path, e, nil)
	default:
		s.runs.Add(e)
	}
	if err != nil {
		return fmt.Errorf("stage %s: %w", e.Path, err)
	}
	return nil
}

// lstat reports whether the home has rel, without following symlinks. A
// path below a file or symlink does not exist.
func (r *restorer) lstat(rel string, st *unix.Stat_t) (bool, error) {
	if r.home < 0 {
		return false, nil
	}
	err := unix.Fstatat(r.home, rel, st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return false, nil
	}
	return false, fmt.Errorf("inspect %s: %w", r.abs(rel), err)
}

func (r *restorer) change(kind ChangeKind, rel string, size int64) {
	if r.o.OnChange != nil {
		r.o.OnChange(Change{Kind: kind, Path: rel, Size: size})
	}
}
