package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/testhome"
)

// TestStoreOfAnotherFormatIsRefused: a marker naming another format
// version, or garbage, stops both commands before they write or restore
// anything, and the message names the version found and the one supported.
func TestStoreOfAnotherFormatIsRefused(t *testing.T) {
	home := buildHome(t, "", 0)
	for _, c := range []struct{ marker, want string }{
		{`{"homesnap":7}`, fmt.Sprintf("format version 7; this homesnap supports versions 1 to %d", repo.FormatVersion)},
		{"\x00\x01garbage", fmt.Sprintf("supports format version %d", repo.FormatVersion)},
	} {
		storeDir := t.TempDir()
		os.WriteFile(filepath.Join(storeDir, "homesnap.json"), []byte(c.marker), 0o644)
		r := run(t, "snapshot", nil, "--once", "--home", home, "--store", storeDir)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("snapshot into a store with marker %q: exit %d, want a refusal saying %q:\n%s", c.marker, r.code, c.want, r.stderr)
		}
		if entries, _ := os.ReadDir(storeDir); len(entries) != 1 {
			t.Errorf("the refused store was written to: %v", entries)
		}
		target := t.TempDir()
		r = run(t, "restore", nil, "--home", target, "--store", storeDir, "--allow-empty")
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("restore from a store with marker %q: exit %d, want a refusal saying %q:\n%s", c.marker, r.code, c.want, r.stderr)
		}
	}
}

// TestListShowsTheCommittedHistory: a snapshot the head's history does not
// reach (here: the head moved back, as when a writer lost its race after
// storing its manifest) is not listed; the table and the JSON carry each
// snapshot's record.
func TestListShowsTheCommittedHistory(t *testing.T) {
	home, storeDir := buildHome(t, "", 0), t.TempDir()
	env := []string{"HOMESNAP_HOME=" + home, "HOMESNAP_STORE=" + storeDir}
	id1 := ok(t, run(t, "snapshot", env, "--once"))
	testhome.Change(t, home)
	id2 := ok(t, run(t, "snapshot", env, "--once"))
	head2, _ := os.ReadFile(filepath.Join(storeDir, "head.json"))
	writeRandom(t, home, "jobs/test/builds/7/log", 1000)
	lost := ok(t, run(t, "snapshot", env, "--once"))
	os.WriteFile(filepath.Join(storeDir, "head.json"), head2, 0o644) // lost is discarded

	l := list(t, storeDir, nil)
	if strings.Join(l.ids, " ") != id1+" "+id2 || l.head != id2 {
		t.Errorf("--list = %v head %s, want [%s %s] head %s (not the discarded %s)", l.ids, l.head, id1, id2, id2, lost)
	}
	var recs []struct {
		ID       string   `json:"id"`
		Parent   string   `json:"parent"`
		Files    int64    `json:"files"`
		Bytes    int64    `json:"bytes"`
		NewBytes int64    `json:"new_bytes"`
		Archives []string `json:"archives"`
	}
	out := ok(t, run(t, "homesnap", env, "list", "--output", "json"))
	if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 2 {
		t.Fatalf("--output json: %v\n%s", err, out)
	}
	tree := selectedTree(t, home)
	if recs[1].Parent != id1 || recs[0].Parent != "" || recs[0].Files == 0 || recs[0].NewBytes != recs[0].Bytes ||
		recs[1].NewBytes >= recs[1].Bytes || len(recs[1].Archives) != 2 {
		t.Errorf("records do not describe the snapshots (%d paths selected):\n%s", len(tree), out)
	}
	table := ok(t, run(t, "homesnap", env, "list"))
	lines := strings.Split(table, "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[2], id2+" (head)") || !strings.Contains(lines[2], id1) || strings.Contains(table, lost) {
		t.Errorf("--list table:\n%s", table)
	}
}
