package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/auth"
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

// TestPruneWithoutIdentityLeavesAnEncryptedStoreAlone: an encrypted store
// is authenticated with its age identities, and a prune without one would
// rewrite the kept records untagged, which every restore then refuses (on
// the old main it did: the init container's next restore failed). It is
// refused before anything is deleted or written, as for a plain
// authenticated store without its key; a dry run, which writes nothing,
// still runs.
func TestPruneWithoutIdentityLeavesAnEncryptedStoreAlone(t *testing.T) {
	ctx := context.Background()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	identity := filepath.Join(t.TempDir(), "age.key")
	if err := os.WriteFile(identity, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir, home := t.TempDir(), snaptest.NewHome(t)
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(home, "jobs", "changed.xml"), []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := Snapshot(ctx, []string{"--once", "--home", home, "--store", dir, "--age-identity-file", identity, "--log-level", "error"}, io.Discard, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	before := snaptest.All(t, dir)
	var out strings.Builder
	if err := Prune(ctx, []string{"--store", dir, "--keep-last", "1", "--dry-run", "--log-level", "error"}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "would delete") {
		t.Fatalf("dry run without the identity: %v, %q", err, out.String())
	}
	err = Prune(ctx, []string{"--store", dir, "--keep-last", "1", "--log-level", "error"}, io.Discard, io.Discard)
	if !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), "prune rewrites records") {
		t.Errorf("prune without the identity: %v, want a refusal saying it needs the key", err)
	}
	snaptest.AssertSame(t, before, snaptest.All(t, dir))
	if err := Prune(ctx, []string{"--store", dir, "--keep-last", "1", "--age-identity-file", identity, "--log-level", "error"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := Restore(ctx, []string{"--home", t.TempDir(), "--store", dir, "--age-identity-file", identity, "--log-level", "error"}, io.Discard, io.Discard); err != nil {
		t.Errorf("restore after the prune with the identity: %v", err)
	}
}
