package snapshot

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/journal"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/selector"
)

// ChangeJournal lets a long-lived process's snapshots stat and read only what
// changed since its previous snapshot (internal/journal), and reuse the
// rest of the parent's manifest. Its changes apply only to the snapshot
// the previous one of this process committed (or found unchanged): any
// other parent (another writer, a restart, a failed snapshot) and any
// interval the journal cannot vouch for are walked fully.
//
// The base the changes are re-walked onto is the parent's manifest,
// streamed once for both the rescan and the merge with the parent: memory
// holds only the entries between the two (what the rescan skips or
// replaces), not the home's.
type ChangeJournal struct {
	j           *journal.Journal
	verifyEvery time.Duration

	mu         sync.Mutex
	base       string    // the snapshot the journal's next changes apply to
	baseClean  bool      // base has no entry marked changed while read
	lastVerify time.Time // of the last full walk
}

// OpenChangeJournal starts following home's selection. verifyEvery spaces the
// full walks that check the journal (0: never).
func OpenChangeJournal(home *homefs.Home, sel *selector.Selector, verifyEvery time.Duration) (*ChangeJournal, error) {
	j, err := journal.Open(home, sel)
	if err != nil {
		return nil, err
	}
	return &ChangeJournal{j: j, verifyEvery: verifyEvery, lastVerify: time.Now()}, nil
}

// Watches is the number of inotify watches the journal holds.
func (f *ChangeJournal) Watches() int {
	st := f.j.Stats()
	return st.DirWatches + st.FileWatches
}

// HeldBytes is about what the journal holds on the heap for its watches.
func (f *ChangeJournal) HeldBytes() int64 { return int64(f.Watches()) * journal.WatchBytes }

// Close stops following the home.
func (f *ChangeJournal) Close() error { return f.j.Close() }

// JournalMode is ChangeJournalUse.Mode when only the changes were re-walked.
const JournalMode = "journal"

// ChangeJournalUse says how a snapshot used the journal (Result.ChangeJournal).
type ChangeJournalUse struct {
	// Mode is "journal" (only the changes were re-walked), "walk" (a full
	// walk: Fallback says why) or "verify" (the scheduled verification
	// walk, compared with what the journal gave).
	Mode     string
	Fallback string // the reason label of a full walk
	// Differences are the paths the verification walk found otherwise
	// than the journal.
	Differences int64
	Watches     int
	// Unread counts the entries of the parent's manifest passed over in
	// spans where nothing changed (archive.Span): neither decoded nor
	// compared.
	Unread int64
}

// maxDifferencesLogged bounds the lines a verification logs.
const maxDifferencesLogged = 20

// changeRun is one snapshot's use of the journal.
type changeRun struct {
	f      *ChangeJournal
	use    ChangeJournalUse
	parent string
	// unchanged: nothing changed since the parent, which has nothing
	// to read again: the snapshot need not read anything.
	unchanged bool
	// dirs counts the directories the journal names changes in (paths
	// of one directory mostly share a span of the parent's manifest), and
	// the hard-linked inodes it names.
	dirs int64
}

// begin takes the journal's changes for a snapshot over parent (empty:
// none is read) and returns the source to record. A headTree source
// takes nothing: it moves the base along when it rewrites the base.
func (f *ChangeJournal) begin(o *Options, parent string, src source) (*changeRun, source) {
	r := &changeRun{f: f, parent: parent}
	if src.headTree() {
		return r, src
	}
	ch, err := f.j.Take()
	f.mu.Lock()
	base, clean, verifyDue := f.base, f.baseClean, f.verifyEvery > 0 && time.Since(f.lastVerify) >= f.verifyEvery
	f.mu.Unlock()
	// A full walk tells the journal of the files with several names: it
	// watches them itself, and does not stat every file to find them.
	if w, ok := src.(walk); ok {
		w.linked = f.j.Linked
		src = w
	}
	var full *journal.FullWalkError
	switch {
	case errors.As(err, &full):
		r.use = ChangeJournalUse{Mode: "walk", Fallback: string(full.Reason)}
		o.Log.Info().Str("reason", string(full.Reason)).Msg("full walk: " + full.Error())
		return r, src
	case err != nil: // not one of Take's answers: treated as untrusted
		r.use = ChangeJournalUse{Mode: "walk", Fallback: string(journal.ReasonUnknown)}
		o.Log.Info().Err(err).Str("reason", r.use.Fallback).Msg("full walk: the change journal failed")
		return r, src
	case parent == "" || parent != base:
		r.use = ChangeJournalUse{Mode: "walk", Fallback: "parent"}
		o.Log.Info().Str("reason", "parent").Str("parent", parent).Str("journal_base", base).
			Msg("full walk: the head is not the snapshot the change journal follows (another writer, a restart or a failed snapshot)")
		return r, src
	}
	st, sel, home := o.Store, o.Selector, o.Home
	// The other names of changed hard-linked files come from a reader of
	// the parent's manifest of their own.
	resolved := func(ctx context.Context) (*journal.Changes, error) {
		if len(ch.Inodes) == 0 {
			return ch, nil
		}
		m, err := repo.OpenManifest(ctx, st, parent)
		if err != nil {
			return nil, err
		}
		defer m.Close()
		return ch.ResolveInodes(m)
	}
	if verifyDue {
		r.use.Mode = "verify"
		rescan := func(ctx context.Context, skipped scan.Skipped, fn func(*archive.Entry) error) error {
			ch, err := resolved(ctx)
			if err != nil {
				return err
			}
			m, err := repo.OpenManifest(ctx, st, parent)
			if err != nil {
				return err
			}
			defer m.Close()
			return journal.Rescan(ctx, home, sel, m, ch, skipped, fn)
		}
		return r, walk{verify: rescan, differences: &r.use.Differences, seen: f.j.Seen, linked: f.j.Linked}
	}
	r.use.Mode = JournalMode
	r.unchanged = ch.Empty() && clean && !o.Force
	dirs := map[string]bool{}
	for p := range ch.Paths {
		dirs[path.Dir(p)] = true
	}
	r.dirs = int64(len(dirs) + len(ch.Inodes))
	return r, walk{rescan: func(ctx context.Context, base journal.Base, skipped scan.Skipped, fn func(*archive.Entry) error) error {
		ch, err := resolved(ctx)
		if err != nil {
			return err
		}
		return journal.Rescan(ctx, home, sel, base, ch, skipped, fn)
	}}
}

// end records how the snapshot ended: committed is the head it left (its
// own ID, or the parent when nothing changed), clean that it marked no
// entry to be read again; on failure the changes taken were not applied,
// so the next snapshot walks fully.
func (r *changeRun) end(err error, committed string, clean bool) {
	f := r.f
	r.use.Watches = f.Watches()
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.use.Mode == "": // a rewrite of the head's tree: the base moves with it
		if err == nil && r.parent == f.base && committed != "" {
			f.base = committed // with the same entries: clean as it was
		}
		return
	case err != nil:
		f.base = ""
		f.j.Invalidate("the snapshot failed: " + err.Error())
		return
	}
	f.base, f.baseClean = committed, clean
	if r.use.Mode != JournalMode {
		f.lastVerify = time.Now()
	}
}

// verifyAgainst compares, path by path, the entries the walk reports
// (through the returned fn) with those rescan gives, logging the first
// differences and counting them all. A path the journal has seen change
// since its changes were taken (seen) is no difference: the walk ran
// later than the take and found the newer state. done reports the paths
// only rescan has after the walk's last one, and waits for it.
func verifyAgainst(ctx context.Context, log zerolog.Logger, rescan func(context.Context, scan.Skipped, func(*archive.Entry) error) error, seen func(string) bool, differences *int64, fn func(*archive.Entry) error) (walkFn func(*archive.Entry) error, done func(walkErr error) error) {
	ctx, cancel := context.WithCancel(ctx)
	got := make(chan *archive.Entry, 256)
	errc := make(chan error, 1)
	go func() {
		defer close(got)
		errc <- rescan(ctx, nil, func(e *archive.Entry) error {
			select {
			case got <- e:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
	}()
	var during int64 // changes made while the walk ran
	differ := func(path, what string) {
		if path != "" && seen(path) {
			during++
			log.Debug().Str("path", path).Msg("verification walk: changed while the walk ran; the next snapshot has it")
			return
		}
		*differences++
		if *differences <= maxDifferencesLogged {
			log.Warn().Str("path", path).Msg("verification walk: " + what)
		} else if *differences == maxDifferencesLogged+1 {
			log.Warn().Msg("verification walk: more differences, not logged one by one")
		}
	}
	next, ok := <-got
	walkFn = func(e *archive.Entry) error {
		for ok && archive.ComparePaths(next.Path, e.Path) < 0 {
			differ(next.Path, "gone, the change journal did not see it go")
			next, ok = <-got
		}
		switch {
		case ok && next.Path == e.Path:
			if !e.SameMeta(next) || e.Implied != next.Implied {
				differ(e.Path, "changed, the change journal did not see it change")
			}
			next, ok = <-got
		default:
			differ(e.Path, "present, the change journal did not see it appear")
		}
		return fn(e)
	}
	done = func(walkErr error) error {
		if walkErr == nil {
			for ; ok; next, ok = <-got {
				differ(next.Path, "gone, the change journal did not see it go")
			}
		}
		cancel()
		for range got { // let the rescan end
		}
		rerr := <-errc
		if walkErr != nil {
			return walkErr
		}
		if rerr != nil && !errors.Is(rerr, context.Canceled) { // the walk stands alone
			differ("", fmt.Sprintf("the change journal's rescan failed: %v", rerr))
		}
		if during > 0 {
			log.Info().Int64("changed_during_walk", during).Msg("verification walk: paths changed while it ran; the change journal has them for the next snapshot")
		}
		if *differences > 0 {
			log.Warn().Int64("differences", *differences).Msg("verification walk: the change journal missed changes; the walk's entries are stored")
		}
		return nil
	}
	return walkFn, done
}
