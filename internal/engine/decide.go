package engine

import (
	"errors"
	"fmt"
)

// Situation is what a restore knows before it changes anything: the home
// (its selection empty or not, its mark, local changes since the mark) and
// the store (empty or not, where the mark's snapshot stands).
type Situation struct {
	HomeEmpty  bool // the home holds none of the selection
	StoreEmpty bool // the store has no snapshot
	// Marked: the home has a mark. MarkIsTarget: it names the snapshot to
	// restore. MarkInHistory: it names another snapshot of the head's
	// history (the store holds everything the home held then).
	Marked, MarkIsTarget, MarkInHistory bool
	LocalChanges                        bool // the home changed since its mark
	// Chosen: the snapshot was named (--snapshot, --at), not the head by
	// default; local changes are then never a reason to skip.
	Chosen bool
}

// Action is what a restore does about its Situation.
type Action string

const (
	ActRestore    Action = "restore"      // full restore: the home has none of the selection
	ActDelta      Action = "delta"        // fetch only what differs, remove what the snapshot lacks
	ActNothing    Action = "nothing"      // the home is at the snapshot already
	ActSkipNewer  Action = "skip-newer"   // the home is newer than the store: the sidecar will snapshot it
	ActFirstBoot  Action = "first-boot"   // empty store, --allow-empty: nothing to restore
	ActNoSnapshot Action = "no-snapshot"  // empty store without --allow-empty
	ActDiverged   Action = "diverged"     // home and store both changed, or unknown data: refused
	ActForced     Action = "forced-delta" // diverged, but --force: restore, keeping what it replaces
)

// Decision is an Action and why it was taken, for the log.
type Decision struct {
	Action Action
	Reason string
}

// Decide is the restore's decision table (docs/usage.md: "What restore decides").
// It is pure: every input is in s, force and allowEmpty.
func Decide(s Situation, force, allowEmpty bool) Decision {
	switch {
	case s.StoreEmpty && allowEmpty:
		return Decision{ActFirstBoot, "the store has no snapshot yet (first boot)"}
	case s.StoreEmpty:
		return Decision{ActNoSnapshot, "the store has no snapshot"}
	case s.HomeEmpty:
		return Decision{ActRestore, "the home holds none of the selection"}
	case s.MarkIsTarget && !s.LocalChanges:
		return Decision{ActNothing, "the home is at this snapshot and has not changed since"}
	case s.MarkIsTarget && !s.Chosen:
		return Decision{ActSkipNewer, "the home is at the head and changed since: it is newer than the store"}
	case s.MarkInHistory && !s.LocalChanges:
		return Decision{ActDelta, "the home is at another snapshot of this store's history and has not changed since"}
	}
	why := "the home holds data and no mark saying which snapshot it came from"
	switch {
	case s.MarkIsTarget:
		why = "the home changed since this snapshot; restoring it would undo those changes"
	case s.Marked && !s.MarkInHistory:
		why = "the home's mark names a snapshot this store's history does not hold"
	case s.Marked:
		why = "the home changed since its snapshot, and the store holds another"
	}
	if force {
		return Decision{ActForced, why + "; --force: restoring, keeping what it replaces or removes"}
	}
	return Decision{ActDiverged, why}
}

// ErrDiverged is wrapped by the error a refused restore returns.
var ErrDiverged = errors.New("refused: the home has data the store does not")

// DivergedError explains a refused restore.
type DivergedError struct {
	Home, Store, Snapshot, Reason string
}

func (e *DivergedError) Error() string {
	return fmt.Sprintf("%v (%s): not restoring snapshot %s of %s into %s, which would lose it. Take a snapshot of the home first, restore into another directory with --target, or pass --force to restore anyway (what it replaces or removes is kept in %s*)",
		ErrDiverged, e.Reason, e.Snapshot, e.Store, e.Home, displacedPrefix)
}

func (e *DivergedError) Unwrap() error { return ErrDiverged }
