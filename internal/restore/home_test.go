package restore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/testhome"
)

// TestRestoredHomeMarkMatchesAWalk: the mark a restore writes from its own
// counts says what a stat walk of the restored home says, so the next boot
// finds the home at the head, and sees any change made after it.
func TestRestoredHomeMarkMatchesAWalk(t *testing.T) {
	src, st := snaptest.NewHome(t), snaptest.NewStore(t)
	id := snaptest.Snap(t, src, st).ID
	sel := snaptest.Jenkins(t)
	over := snaptest.NewHome(t) // a home with unselected content and a stale selection
	if err := os.WriteFile(filepath.Join(over, "jobs/test/config.xml"), []byte("<stale/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, home := range map[string]string{"empty": filepath.Join(t.TempDir(), "home"), "over a home": over} {
		if err := os.MkdirAll(home, 0o755); err != nil {
			t.Fatal(err)
		}
		res, err := Restore(context.Background(), Options{Home: testhome.Open(t, home), Store: st, Selector: sel, Force: true, Log: zerolog.Nop()})
		if err != nil || !res.Marked {
			t.Fatalf("%s: restore: %v (marked %v)", name, err, res != nil && res.Marked)
		}
		mark, err := homemark.Read(testhome.Open(t, home))
		if err != nil || mark == nil || mark.Snapshot != id {
			t.Fatalf("%s: mark %+v, %v", name, mark, err)
		}
		walk, err := homemark.TakeFingerprint(context.Background(), testhome.Open(t, home), sel)
		if err != nil {
			t.Fatal(err)
		}
		if walk.Entries != mark.Print.Entries || walk.Bytes != mark.Print.Bytes || walk.MaxCTime > mark.Print.MaxCTime {
			t.Fatalf("%s: the restore's mark %+v disagrees with a walk %+v", name, mark.Print, walk)
		}
		if mark.Print.Changed(walk) {
			t.Errorf("%s: the restored home looks changed to its own mark", name)
		}
		// Changes come after the restore has ended: wait until the
		// filesystem's clock has moved past the mark.
		for probe := mark.Print.MaxCTime; probe <= mark.Print.MaxCTime; {
			p := filepath.Join(t.TempDir(), "tick")
			os.WriteFile(p, nil, 0o644)
			var fi unix.Stat_t
			if err := unix.Stat(p, &fi); err != nil {
				t.Fatal(err)
			}
			probe = fi.Ctim.Nano()
		}
		if err := os.Chmod(filepath.Join(home, "secrets"), 0o750); err != nil {
			t.Fatal(err)
		}
		after, err := homemark.TakeFingerprint(context.Background(), testhome.Open(t, home), sel)
		if err != nil {
			t.Fatal(err)
		}
		if !mark.Print.Changed(after) {
			t.Errorf("%s: a chmod after the restore went unseen", name)
		}
	}
}

// TestHeadMarkLeavesTheHomeWithoutAWalk: a home whose mark names the head
// is left as it is, changed since or not, without a walk; a forged mark
// naming the head, whatever selection and fingerprint it claims, cannot
// make the restore write; the walk still runs where it decides (the mark's
// snapshot chosen by name), and a home holding none of the selection is
// still restored.
func TestHeadMarkLeavesTheHomeWithoutAWalk(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	id := snaptest.Snap(t, home, st).ID
	restore := func(what string, o Options) *HomeResult {
		t.Helper()
		o.Home, o.Store, o.Selector, o.Log = testhome.Open(t, home), st, snaptest.Jenkins(t), zerolog.Nop()
		res, err := Restore(context.Background(), o)
		if err != nil && !errors.Is(err, ErrDiverged) {
			t.Fatalf("%s: %v", what, err)
		}
		return res
	}
	leftAlone := func(what string, o Options) {
		t.Helper()
		before := snaptest.All(t, home)
		res := restore(what, o)
		if res.Decision.Action != ActNothing || res.Walked || res.Restore != nil || res.Snapshot != id {
			t.Errorf("%s: %s of %s (%s), walked %v; want nothing, not walked", what, res.Decision.Action, res.Snapshot, res.Decision.Reason, res.Walked)
		}
		snaptest.AssertSame(t, before, snaptest.All(t, home))
	}
	leftAlone("unchanged", Options{})
	snaptest.Write(t, home, "jobs/after-snapshot/config.xml", "<project/>")
	leftAlone("changed since", Options{})
	leftAlone("changed since, forced", Options{Force: true})

	// The walk is still taken where it decides: restoring the mark's
	// snapshot by name refuses to undo the change.
	if res := restore("chosen", Options{Snapshot: id}); res.Decision.Action != ActDiverged || !res.Walked {
		t.Errorf("the mark's snapshot chosen by name: %s, walked %v; want diverged after a walk", res.Decision.Action, res.Walked)
	}

	// Build code forges the mark: the head, a selection that selects
	// nothing here, a fingerprint of nothing. Judged by the mark's
	// selection, the home would look empty and be restored over.
	mark, err := homemark.Read(testhome.Open(t, home))
	if err != nil {
		t.Fatal(err)
	}
	mark.Selection = selector.Spec{Preset: "none", Include: []string{"nothing-here"}}
	mark.Print = homemark.Fingerprint{}
	if err := homemark.Write(testhome.Open(t, home), mark); err != nil {
		t.Fatal(err)
	}
	leftAlone("forged mark", Options{})

	// The selection removed: a home holding none of it is restored, mark
	// or not.
	for _, rel := range []string{"jobs", "nodes", "secrets", "identity.key.enc", "secret.key", "secret.key.not-so-secret"} {
		if err := os.RemoveAll(filepath.Join(home, rel)); err != nil {
			t.Fatal(err)
		}
	}
	if res := restore("emptied", Options{}); res.Decision.Action != ActRestore || res.Walked || !res.Marked {
		t.Errorf("a marked home emptied of its selection: %s (%s), walked %v, marked %v; want a restore", res.Decision.Action, res.Decision.Reason, res.Walked, res.Marked)
	}
}
