package restore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/snaptest"
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
		res, err := RestoreHome(context.Background(), HomeOptions{Options: Options{Home: home, Store: st, Selector: sel, Force: true, Log: zerolog.Nop()}})
		if err != nil || !res.Marked {
			t.Fatalf("%s: restore: %v (marked %v)", name, err, res != nil && res.Marked)
		}
		mark, err := homemark.Read(home)
		if err != nil || mark == nil || mark.Snapshot != id {
			t.Fatalf("%s: mark %+v, %v", name, mark, err)
		}
		walk, _, err := homemark.TakeFingerprint(context.Background(), home, sel)
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
		after, _, err := homemark.TakeFingerprint(context.Background(), home, sel)
		if err != nil {
			t.Fatal(err)
		}
		if !mark.Print.Changed(after) {
			t.Errorf("%s: a chmod after the restore went unseen", name)
		}
	}
}
