package restore

import (
	"context"
	"fmt"

	"github.com/homesnap/homesnap/internal/auth"
	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/store"
)

// HomeResult is the decision taken and, when it restored, the restore.
type HomeResult struct {
	Decision Decision
	Snapshot string  // the snapshot decided about ("" for an empty store)
	Restore  *Result // nil unless a restore ran (also a dry run)
	Marked   bool    // the home's mark now names Snapshot
	// Walked: deciding took a stat walk of the home, which it does only
	// where the walk can change the decision (WalkMatters).
	Walked bool
}

// Restore is the restore, the init container's, the operator's and the
// disaster recovery's: it decides from the home, its mark and the store
// what to do (see Decide), does it, and marks the home with the snapshot
// it now matches. Partial restores (Include/Exclude) skip the decision:
// they are an operator's explicit request and leave the mark alone.
func Restore(ctx context.Context, o Options) (*HomeResult, error) {
	step := func(s string) {
		if o.Step != nil {
			o.Step(s)
		}
	}
	sel := o.Selector
	if sel == nil {
		var err error
		if sel, err = selector.New(selector.Spec{Preset: "jenkins"}); err != nil {
			return nil, err
		}
		o.Selector = sel
	}
	step("reading the head")
	head, _, err := repo.LoadHead(ctx, o.Store)
	if err != nil {
		return nil, err
	}
	sit := Situation{StoreEmpty: head == nil, Chosen: o.Snapshot != ""}
	target := o.Snapshot
	if head != nil && target == "" {
		target = head.Snapshot
	}
	if target != "" {
		if err := repo.CheckID(target); err != nil {
			return nil, err
		}
	}
	if err := checkMark(o, head); err != nil {
		return nil, err
	}
	res := &HomeResult{Snapshot: target}
	if !o.DryRun {
		// A restore killed during its moves left the home half changed:
		// undo that first, so the decision sees the home as it was.
		step("recovering an interrupted restore")
		if err := recoverHome(o.Home, o.Selector, o.Log); err != nil {
			return nil, err
		}
	}
	partial := len(o.Include) > 0 || len(o.Exclude) > 0
	if partial {
		res.Decision = Decision{ActDelta, "a partial restore (include/exclude patterns) changes only what it selects"}
		if head == nil {
			res.Decision = Decide(sit, o.Force, o.AllowEmpty)
			return res, decisionError(o, res)
		}
	} else {
		step("comparing the home with its mark")
		if res.Walked, err = survey(ctx, o, head, target, &sit); err != nil {
			return nil, err
		}
		res.Decision = Decide(sit, o.Force, o.AllowEmpty)
		if err := decisionError(o, res); err != nil {
			return res, err
		}
	}
	switch res.Decision.Action {
	case ActRestore, ActDelta, ActForced:
	default:
		return res, nil
	}
	ro := o
	ro.Snapshot = target
	s := staged{delta: res.Decision.Action != ActRestore, recovered: !o.DryRun}
	if !o.DryRun && !partial {
		// For the mark, and the manifest's chain: read while the home is
		// prepared, not after the restore.
		s.record = loadRecord(ctx, o.Store, target)
	}
	step("restoring snapshot " + target)
	if res.Restore, err = restoreSnapshot(ctx, ro, s); err != nil {
		return res, err
	}
	if s.record == nil {
		return res, nil
	}
	step("marking the home")
	if err := markHome(o, target, head.Seq, res.Restore, s.record); err != nil {
		o.Log.Warn().Err(err).Msg("the home was restored but could not be marked: the next restore will refuse it as unknown data unless forced")
		return res, nil
	}
	res.Marked = true
	return res, nil
}

// decisionError turns the refusing actions into errors.
func decisionError(o Options, res *HomeResult) error {
	switch res.Decision.Action {
	case ActNoSnapshot:
		return &EmptyStoreError{Store: o.Store.String()}
	case ActDiverged:
		return &DivergedError{Home: o.Home.Path, Store: o.Store.String(), Snapshot: res.Snapshot, Reason: res.Decision.Reason}
	}
	return nil
}

// survey fills in what the home and its mark say, and stat-walks the home
// for its local changes only where they change the decision.
func survey(ctx context.Context, o Options, head *repo.Head, target string, sit *Situation) (walked bool, err error) {
	mark, err := homemark.Read(o.Home)
	if err != nil {
		return false, err
	}
	var markSel *selector.Selector
	if mark != nil {
		// The fingerprint is only comparable over the selection it was
		// taken with; a mark whose selection is invalid is damaged.
		if markSel, err = selector.New(mark.Selection); err != nil {
			return false, fmt.Errorf("home mark %s: %w", homemark.Name, err)
		}
	}
	// Empty or not is judged by what this restore may change, never by
	// the mark's selection: a forged selection that matches nothing must
	// not make a home with data look empty and be restored over (Decide).
	holds, err := homemark.HoldsSelection(ctx, o.Home, o.Selector)
	if err != nil {
		return false, err
	}
	sit.HomeEmpty = !holds
	if mark == nil || head == nil {
		return false, nil
	}
	sit.Marked = true
	sit.MarkIsTarget = mark.Snapshot == target
	if !sit.MarkIsTarget {
		// Is the mark's snapshot in the head's history? Then the store
		// holds everything the (unchanged) home holds, and moving the home
		// to the target, forwards or back, loses nothing. Records are read
		// from the head back to the mark's time, no further, and need no
		// LIST.
		err := repo.WalkHistory(ctx, o.Store, head.Snapshot, func(r *repo.Record) bool {
			if r.ID == mark.Snapshot {
				sit.MarkInHistory = true
				return false
			}
			return !r.Time.Before(mark.Time)
		})
		if err != nil {
			return false, err
		}
	}
	if !WalkMatters(*sit, o.Force, o.AllowEmpty) {
		return false, nil
	}
	now, err := homemark.TakeFingerprint(ctx, o.Home, markSel)
	if err != nil {
		return false, err
	}
	sit.LocalChanges = mark.Print.Changed(now)
	return true, nil
}

// pendingRecord is a snapshot's record being read in the background.
type pendingRecord struct {
	done chan struct{}
	rec  *repo.Record
	err  error
}

// loadRecord starts reading snapshot id's record.
func loadRecord(ctx context.Context, st store.Store, id string) *pendingRecord {
	p := &pendingRecord{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.rec, p.err = repo.LoadRecord(ctx, st, id)
	}()
	return p
}

// get waits for the record.
func (p *pendingRecord) get() (*repo.Record, error) {
	<-p.done
	return p.rec, p.err
}

// markHome records that the home now matches snapshot id, as restore res
// left it, and saw the head's commit count seq; record is the snapshot's.
func markHome(o Options, id string, seq int64, res *Result, record *pendingRecord) error {
	rec, err := record.get()
	if err != nil {
		return err
	}
	print, err := homemark.RestoredPrint(o.Home, res.Entries, res.Bytes)
	if err != nil {
		return err
	}
	return homemark.Write(o.Home, &homemark.Mark{Store: o.Store.String(), Snapshot: id, Time: rec.Time, Selection: o.Selector.Spec(), Print: print, Seq: seq})
}

// ErrBehindMark is wrapped by a BehindMarkError: the head went back.
var ErrBehindMark = fmt.Errorf("%w past what this home saw", auth.ErrRollback)

// BehindMarkError: the store's head is older than the last commit the
// home's mark saw.
type BehindMarkError struct {
	Home, Store  string
	Head         string
	HeadSeq      int64
	MarkSnapshot string
	MarkSeq      int64
}

func (e *BehindMarkError) Error() string {
	return fmt.Sprintf("%s: %v: the head names snapshot %s (commit %d), but this home (%s) was marked by commit %d of the same store (snapshot %s): the head went back after the home saw a newer one, and a bucket writer may have put an old head back",
		e.Store, ErrBehindMark, e.Head, e.HeadSeq, e.Home, e.MarkSeq, e.MarkSnapshot)
}

func (e *BehindMarkError) Unwrap() error { return ErrBehindMark }

// checkMark refuses a head older than the newest commit the home's mark
// saw, before anything in the home changes. The store's records cannot
// prove a head older by exactly one snapshot (auth.CheckRollback): that
// newest record looks like a snapshot whose commit crashed. The home
// remembers more, for as long as it lives. Only a mark of the same store
// is compared (a home moved to another store starts its count anew), and
// a head naming the snapshot the mark names is not behind it. A mark
// that cannot be read is left to the decision, which judges it
// where it matters. Whoever writes the home can forge the mark, and so
// refuse restores into it: no more than deleting the home's data does.
func checkMark(o Options, head *repo.Head) error {
	if head == nil {
		return nil
	}
	mark, err := homemark.Read(o.Home)
	if err != nil || mark == nil || mark.Store != o.Store.String() || mark.Seq <= head.Seq || mark.Snapshot == head.Snapshot {
		return nil
	}
	err = &BehindMarkError{Home: o.Home.Path, Store: o.Store.String(), Head: head.Snapshot, HeadSeq: head.Seq, MarkSnapshot: mark.Snapshot, MarkSeq: mark.Seq}
	if !o.AllowOlderHead {
		return err
	}
	o.Log.Warn().Err(err).Msg("RESTORING FROM A HEAD OLDER THAN THIS HOME HAS SEEN, as overridden")
	return nil
}
