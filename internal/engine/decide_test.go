package engine

import "testing"

// TestDecide is the decision table of docs/usage.md, row by row.
func TestDecide(t *testing.T) {
	for _, c := range []struct {
		name              string
		s                 Situation
		force, allowEmpty bool
		want              Action
	}{
		{"empty store, first boot", Situation{StoreEmpty: true, HomeEmpty: true}, false, true, ActFirstBoot},
		{"empty store, home with data, first boot", Situation{StoreEmpty: true}, false, true, ActFirstBoot},
		{"empty store without --allow-empty", Situation{StoreEmpty: true, HomeEmpty: true}, false, false, ActNoSnapshot},
		{"empty home (new volume)", Situation{HomeEmpty: true}, false, false, ActRestore},
		{"empty home with a stale mark", Situation{HomeEmpty: true, Marked: true, MarkInHistory: true, LocalChanges: true}, false, false, ActRestore},
		{"at the head, unchanged", Situation{Marked: true, MarkIsTarget: true}, false, false, ActNothing},
		{"at the head, changed since: newer", Situation{Marked: true, MarkIsTarget: true, LocalChanges: true}, false, false, ActSkipNewer},
		{"at the head, changed, forced still skips", Situation{Marked: true, MarkIsTarget: true, LocalChanges: true}, true, false, ActSkipNewer},
		{"chosen snapshot = mark, changed: diverged", Situation{Marked: true, MarkIsTarget: true, LocalChanges: true, Chosen: true}, false, false, ActDiverged},
		{"chosen snapshot = mark, changed, forced", Situation{Marked: true, MarkIsTarget: true, LocalChanges: true, Chosen: true}, true, false, ActForced},
		{"behind the store, unchanged: delta", Situation{Marked: true, MarkInHistory: true}, false, false, ActDelta},
		{"both changed", Situation{Marked: true, MarkInHistory: true, LocalChanges: true}, false, false, ActDiverged},
		{"both changed, forced", Situation{Marked: true, MarkInHistory: true, LocalChanges: true}, true, false, ActForced},
		{"data, no mark", Situation{}, false, false, ActDiverged},
		{"data, no mark, forced", Situation{}, true, false, ActForced},
		{"mark of another store", Situation{Marked: true}, false, false, ActDiverged},
		{"mark of another store, unchanged: still refused", Situation{Marked: true, LocalChanges: false}, false, true, ActDiverged},
	} {
		if got := Decide(c.s, c.force, c.allowEmpty); got.Action != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got.Action, got.Reason, c.want)
		}
	}
}
