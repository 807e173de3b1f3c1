package restore

import (
	"strings"
	"testing"
)

// TestDecide is the decision table of docs/usage.md, row by row, with
// whether the row needs a stat walk of the home (only where the home's
// local changes can change the answer).
func TestDecide(t *testing.T) {
	for _, c := range []struct {
		name              string
		s                 Situation
		force, allowEmpty bool
		want              Action
		walk              bool
	}{
		{"empty store, first boot", Situation{StoreEmpty: true, HomeEmpty: true}, false, true, ActFirstBoot, false},
		{"empty store, home with data, first boot", Situation{StoreEmpty: true}, false, true, ActFirstBoot, false},
		{"empty store without --allow-empty", Situation{StoreEmpty: true, HomeEmpty: true}, false, false, ActNoSnapshot, false},
		{"empty home (new volume)", Situation{HomeEmpty: true}, false, false, ActRestore, false},
		{"empty home with a stale mark", Situation{HomeEmpty: true, Marked: true, MarkInHistory: true, LocalChanges: true}, false, false, ActRestore, false},
		{"empty home with a mark naming the head", Situation{HomeEmpty: true, Marked: true, MarkIsTarget: true}, false, false, ActRestore, false},
		{"at the head, unchanged", Situation{Marked: true, MarkIsTarget: true}, false, false, ActNothing, false},
		{"at the head, changed since: newer", Situation{Marked: true, MarkIsTarget: true, LocalChanges: true}, false, false, ActNothing, false},
		{"at the head, changed, forced: still left as it is", Situation{Marked: true, MarkIsTarget: true, LocalChanges: true}, true, false, ActNothing, false},
		{"at the head, forced", Situation{Marked: true, MarkIsTarget: true}, true, true, ActNothing, false},
		{"chosen snapshot = mark, unchanged", Situation{Marked: true, MarkIsTarget: true, Chosen: true}, false, false, ActNothing, true},
		{"chosen snapshot = mark, changed: diverged", Situation{Marked: true, MarkIsTarget: true, LocalChanges: true, Chosen: true}, false, false, ActDiverged, true},
		{"chosen snapshot = mark, changed, forced", Situation{Marked: true, MarkIsTarget: true, LocalChanges: true, Chosen: true}, true, false, ActForced, true},
		{"behind the store, unchanged: delta", Situation{Marked: true, MarkInHistory: true}, false, false, ActDelta, true},
		{"chosen older snapshot, unchanged: delta", Situation{Marked: true, MarkInHistory: true, Chosen: true}, false, false, ActDelta, true},
		{"both changed", Situation{Marked: true, MarkInHistory: true, LocalChanges: true}, false, false, ActDiverged, true},
		{"both changed, forced", Situation{Marked: true, MarkInHistory: true, LocalChanges: true}, true, false, ActForced, true},
		{"data, no mark", Situation{}, false, false, ActDiverged, false},
		{"data, no mark, forced", Situation{}, true, false, ActForced, false},
		{"mark of another store", Situation{Marked: true}, false, false, ActDiverged, false},
		{"mark of another store, unchanged: still refused", Situation{Marked: true, LocalChanges: false}, false, true, ActDiverged, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Decide(c.s, c.force, c.allowEmpty); got.Action != c.want {
				t.Errorf("%s (%s), want %s", got.Action, got.Reason, c.want)
			}
			if got := WalkMatters(c.s, c.force, c.allowEmpty); got != c.walk {
				t.Errorf("WalkMatters = %v, want %v", got, c.walk)
			}
		})
	}
}

// TestHeadMarkDecidesWithoutTheHomesChanges: a home marked with the head,
// restored by default, gets one decision, with one reason saying it was
// not walked, whatever its local changes: nothing that Decide reads from
// the walk can turn it into a write.
func TestHeadMarkDecidesWithoutTheHomesChanges(t *testing.T) {
	for _, force := range []bool{false, true} {
		for _, allowEmpty := range []bool{false, true} {
			unchanged := Decide(Situation{Marked: true, MarkIsTarget: true}, force, allowEmpty)
			changed := Decide(Situation{Marked: true, MarkIsTarget: true, LocalChanges: true}, force, allowEmpty)
			if unchanged != changed || unchanged.Action != ActNothing {
				t.Errorf("force %v, allow-empty %v: unchanged %+v, changed %+v; want one decision: nothing", force, allowEmpty, unchanged, changed)
			}
			if want := "(not walked)"; !strings.Contains(unchanged.Reason, want) {
				t.Errorf("the reason %q does not say %s", unchanged.Reason, want)
			}
		}
	}
}
