package restore

import (
	"context"
	"errors"
	"testing"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/auth"
	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// TestHeadBehindTheMarkIsRefusedOnlyForItsStore: a mark that saw a later
// commit of this store than the head refuses every restore into the home,
// partial ones included, as a rollback and before the home changes; a
// mark of another store, or one from before marks counted commits, does
// not; the override restores and the mark takes the head's count.
func TestHeadBehindTheMarkIsRefusedOnlyForItsStore(t *testing.T) {
	testenv.Long(t, "restores through many snapshots and stores")
	src, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, src, st)
	sel := snaptest.Jenkins(t)
	mark := func(t *testing.T, store string, seq int64) string {
		home := snaptest.NewHome(t)
		if err := homemark.Write(testhome.Open(t, home), &homemark.Mark{Store: store, Snapshot: "20200101T000000.000Z-000000", Selection: sel.Spec(), Seq: seq}); err != nil {
			t.Fatal(err)
		}
		return home
	}
	restore := func(home string, o Options) error {
		o.Home, o.Store, o.Selector, o.Force, o.Log = testhome.Open(t, home), st, sel, true, zerolog.Nop()
		_, err := Restore(context.Background(), o)
		return err
	}
	for name, o := range map[string]Options{"whole": {}, "partial": {Include: []string{"jobs/**"}}} {
		t.Run(name, func(t *testing.T) {
			var behind *BehindMarkError
			if err := restore(mark(t, st.String(), 5), o); !errors.As(err, &behind) || !errors.Is(err, auth.ErrRollback) || behind.MarkSeq != 5 || behind.HeadSeq != 1 {
				t.Fatalf("a head (commit 1) behind the mark (commit 5): %v, want a rollback naming both", err)
			}
		})
	}
	t.Run("another store", func(t *testing.T) {
		if err := restore(mark(t, "file:///elsewhere", 5), Options{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a mark without a count", func(t *testing.T) {
		if err := restore(mark(t, st.String(), 0), Options{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("overridden", func(t *testing.T) {
		home := mark(t, st.String(), 5)
		if err := restore(home, Options{AllowOlderHead: true}); err != nil {
			t.Fatal(err)
		}
		if m, err := homemark.Read(testhome.Open(t, home)); err != nil || m.Seq != 1 {
			t.Fatalf("the mark after the override: %+v, %v; want commit 1", m, err)
		}
	})
}
