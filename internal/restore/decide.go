package restore

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
	// LocalChanges: the home changed since its mark. Only a stat walk of
	// the whole home tells, so it is known only where WalkMatters.
	LocalChanges bool
	// Chosen: the snapshot was named (--snapshot, --at), not the head by
	// default; local changes are then never a reason to skip.
	Chosen bool
}

// Action is what a restore does about its Situation.
type Action string

const (
	ActRestore    Action = "restore"      // full restore: the home has none of the selection
	ActDelta      Action = "delta"        // fetch only what differs, remove what the snapshot lacks
	ActNothing    Action = "nothing"      // the home is left as it is: at the snapshot, or newer than the head
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
//
// A home whose mark names the head, restored by default (a persistent
// volume's every pod start), is left as it is whether or not it changed
// since: unchanged it is at the head, changed it is newer than the store
// and the sidecar snapshots it. So that row does not read LocalChanges,
// and the restore does not walk the home for it (WalkMatters).
//
// The mark lies in the home, which untrusted build code (uid 1000) can
// write, so anyone there can forge it. Naming the head, a forged mark
// makes the restore leave the home as it is: a home writer's own data
// stays, which that writer could have kept by not touching the home at
// all, and nothing is written. Reading its fingerprint would not make the
// row safer: here it can only choose between two ways of writing nothing
// (unchanged, or newer than the store), which is why no walk is needed,
// and a forger controls it anyway. Whether the home is empty (a
// restore, which does write) is not taken from the mark: the restore
// judges it with its own selection, so a mark naming the head cannot make
// it write either.
func Decide(s Situation, force, allowEmpty bool) Decision {
	switch {
	case s.StoreEmpty && allowEmpty:
		return Decision{ActFirstBoot, "the store has no snapshot yet (first boot)"}
	case s.StoreEmpty:
		return Decision{ActNoSnapshot, "the store has no snapshot"}
	case s.HomeEmpty:
		return Decision{ActRestore, "the home holds none of the selection"}
	case s.MarkIsTarget && !s.Chosen:
		return Decision{ActNothing, "the home's mark names the head; the home is left as it is (not walked): at the head, or newer and the sidecar will snapshot it"}
	case s.MarkIsTarget && !s.LocalChanges:
		return Decision{ActNothing, "the home is at this snapshot and has not changed since"}
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
		return Decision{ActForced, why + "; forced: restoring, keeping what it replaces or removes"}
	}
	return Decision{ActDiverged, why}
}

// WalkMatters reports whether Decide's answer for s depends on
// LocalChanges, the one input that costs a stat walk of the whole home
// (about 25 s at a million files, before Jenkins can start): the restore
// walks only then.
func WalkMatters(s Situation, force, allowEmpty bool) bool {
	unchanged, changed := s, s
	unchanged.LocalChanges, changed.LocalChanges = false, true
	return Decide(unchanged, force, allowEmpty) != Decide(changed, force, allowEmpty)
}

// ErrDiverged is wrapped by the error a refused restore returns.
var ErrDiverged = errors.New("refused: the home has data the store does not")

// DivergedError explains a refused restore.
type DivergedError struct {
	Home, Store, Snapshot, Reason string
}

func (e *DivergedError) Error() string {
	return fmt.Sprintf("%v (%s): not restoring snapshot %s of %s into %s, which would lose it (a forced restore keeps what it replaces or removes in %s*)",
		ErrDiverged, e.Reason, e.Snapshot, e.Store, e.Home, displacedPrefix)
}

func (e *DivergedError) Unwrap() error { return ErrDiverged }
