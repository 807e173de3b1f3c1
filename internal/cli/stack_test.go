package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/metrics"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store"
)

// layers names st's stack from the top down.
func layers(st store.Store) string {
	var names []string
	for _, l := range store.Layers(st) {
		names = append(names, fmt.Sprintf("%T", l))
	}
	return strings.Join(names, " > ")
}

// TestStoresAreStackedInOrder: each kind of command reads and writes
// through its layers in the order stack.go gives: the metrics count the
// stored bytes beneath the encryption, the authentication tags what is
// stored, the restore's small objects are read once beneath the
// authentication, which checks them each time.
func TestStoresAreStackedInOrder(t *testing.T) {
	ctx := context.Background()
	log := zerolog.Nop()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	identity := filepath.Join(t.TempDir(), "age.key")
	if err := os.WriteFile(identity, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir, home := t.TempDir(), snaptest.NewHome(t)
	if err := Snapshot(ctx, []string{"--once", "--home", home, "--store", dir, "--age-identity-file", identity, "--log-level", "warn"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	open := func() store.Store {
		st, err := store.Open(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a := &AgeSnapshot{AgeIdentity: AgeIdentity{IdentityFile: identity}}

	snap, err := snapshotStack(ctx, a, open(), metrics.New(), log)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := layers(snap.Store), "*crypt.Store > *auth.Store > *metrics.metered > store.checked > *file.Store"; got != want {
		t.Errorf("the snapshot writes through %s, want %s", got, want)
	}
	rest, _, err := restoreStack(ctx, &a.AgeIdentity, open(), "", time.Time{}, log)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := layers(rest.Store), "*crypt.Store > *auth.Store > *repo.onceStore > store.checked > *file.Store"; got != want {
		t.Errorf("the restore reads through %s, want %s", got, want)
	}
	maint, err := maintenanceStack(ctx, &a.AgeIdentity, open(), false, log)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := layers(maint), "*auth.Store > store.checked > *file.Store"; got != want {
		t.Errorf("prune reads and rewrites records through %s, want %s", got, want)
	}
}
