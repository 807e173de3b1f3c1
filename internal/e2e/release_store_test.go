package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/testhome"
)

// TestRestoresTheReleasedFormat restores testdata/release3, a store written
// by the release before the engine was split into packages (format 3,
// age-encrypted and authenticated, a full snapshot and two deltas; see its
// README). Whatever is refactored, a store users already have must list,
// verify and restore exactly as it did: the head byte for byte with every
// attribute the source home had, and an older snapshot by its id.
func TestRestoresTheReleasedFormat(t *testing.T) {
	storeDir := filepath.Join(t.TempDir(), "store")
	if err := os.CopyFS(storeDir, os.DirFS("testdata/release3/store")); err != nil {
		t.Fatal(err)
	}
	key, _ := filepath.Abs("testdata/release3/identity.txt")
	env := []string{"HOMESNAP_STORE=" + storeDir, "HOMESNAP_AGE_IDENTITY_FILE=" + key, "HOMESNAP_LOG_FORMAT=json"}

	l := list(t, storeDir, env)
	if len(l.ids) != 3 || l.head != l.ids[2] {
		t.Fatalf("the released store lists %v with head %q, want three snapshots and the newest as head", l.ids, l.head)
	}
	if r := run(t, "homesnap", env, "verify"); r.code != 0 {
		t.Fatalf("restore --verify of the released store: exit %d\n%s", r.code, tail(r.stderr, 2000))
	}

	raw, err := os.ReadFile("testdata/release3/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var want testhome.Tree
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	ok(t, run(t, "restore", env, "--home", home))
	same(t, "the released store's head", want, wholeTree(t, home))

	first := t.TempDir()
	ok(t, run(t, "restore", env, "--home", first, "--snapshot", l.ids[0]))
	cfg, _ := os.ReadFile(filepath.Join(first, "jobs/a/config.xml"))
	log, err := os.Stat(filepath.Join(first, "jobs/a/builds/1/log"))
	if !strings.Contains(string(cfg), "<description>a</description>") || err != nil || log.ModTime().UTC().Format("2006-01-02T15:04:05.000000000") != "2026-01-02T03:04:05.123456789" {
		t.Fatalf("the released store's first snapshot restored config.xml %q and builds/1/log %v (%v)", cfg, log, err)
	}
}
