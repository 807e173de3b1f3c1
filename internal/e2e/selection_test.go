package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/testhome"
)

// selectionStore is an authenticated file store (a plain one with a key
// file) holding three snapshots of a home, and the bucket writer's view of
// it: ids oldest first, and the tagged head.json each of them committed.
type selectionStore struct {
	env   []string
	bk    bucket
	home  string // the sidecar's home, marked with the newest snapshot
	ids   []string
	heads [][]byte
	good  map[string][]byte // every object, to undo an attack
}

func newSelectionStore(t *testing.T) *selectionStore {
	t.Helper()
	storeDir := t.TempDir()
	keyFile := filepath.Join(t.TempDir(), "auth.key")
	os.WriteFile(keyFile, []byte("5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b\n"), 0o600)
	s := &selectionStore{
		env:  []string{"HOMESNAP_STORE=" + storeDir, "HOMESNAP_LOG_FORMAT=json", "HOMESNAP_AUTH_KEY_FILE=" + keyFile},
		bk:   bucket{t, openWriter(t, storeDir)},
		home: t.TempDir(),
	}
	if err := testhome.Build(s.home); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if i > 0 {
			testhome.Change(t, s.home)
			os.WriteFile(filepath.Join(s.home, "jobs/test/config.xml"), []byte("<project><description>snapshot "+string(rune('1'+i))+"</description></project>\n"), 0o644)
		}
		s.ids = append(s.ids, ok(t, run(t, "snapshot", s.env, "--once", "--home", s.home, "--timeout", "2m")))
		s.heads = append(s.heads, s.bk.load(repo.HeadKey))
	}
	s.good = s.bk.snapshot()
	return s
}

// tomorrow is an --at that every snapshot precedes.
func tomorrow() string { return time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339) }

// rollBack puts the head snapshot i committed back: tagged with the key,
// as a bucket writer can copy it from an earlier listing.
func (s *selectionStore) rollBack(t *testing.T, i int) {
	t.Helper()
	t.Cleanup(func() { s.bk.reset(s.good) })
	s.bk.put(repo.HeadKey, s.heads[i])
}

// TestEverySelectionRefusesARolledBackHead is issue 31 finding 1 as the
// bucket writer: the store's head is put back two snapshots (the store's
// records prove it), and every way a restore chooses a snapshot is
// refused with exit 12, naming the override, with the home untouched. On
// the release before, a plain restore was refused but --at, --snapshot,
// a partial --at, --at into --target, --verify --at and --list were not.
func TestEverySelectionRefusesARolledBackHead(t *testing.T) {
	s := newSelectionStore(t)
	s.rollBack(t, 0)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"head", nil},
		{"--at", []string{"--at", tomorrow()}},
		{"--snapshot", []string{"--snapshot", s.ids[1]}},
		{"partial --at", []string{"--at", tomorrow(), "--only", "jobs/**"}},
		{"partial --snapshot", []string{"--snapshot", s.ids[1], "--only", "jobs/**"}},
	} {
		t.Run(c.name, func(t *testing.T) { refused(t, s.env, exitRollback, "rolled back", c.args...) })
	}
	t.Run("--at --target", func(t *testing.T) {
		home, target := t.TempDir(), t.TempDir()
		r := run(t, "restore", s.env, "--home", home, "--target", target, "--at", tomorrow(), "--timeout", "2m")
		if r.code != exitRollback || !strings.Contains(r.stderr, "rolled back") {
			t.Fatalf("restore --target --at over a rolled-back head: exit %d, want %d\n%s", r.code, exitRollback, tail(r.stderr, 2000))
		}
		if got := wholeTree(t, target); len(got) > 0 {
			t.Fatalf("a refused restore wrote %d paths into the target", len(got))
		}
	})
	t.Run("--verify --at", func(t *testing.T) {
		if r := run(t, "homesnap", s.env, "verify", "--structure", "--at", tomorrow()); r.code != exitRollback {
			t.Fatalf("verify --at of a rolled-back store: exit %d, want %d\n%s", r.code, exitRollback, tail(r.stderr, 2000))
		}
	})
	t.Run("--list", func(t *testing.T) {
		if r := run(t, "homesnap", s.env, "list"); r.code != exitRollback || !strings.Contains(r.stderr, "rolled back") {
			t.Fatalf("--list of a rolled-back store: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, exitRollback, r.stdout, tail(r.stderr, 2000))
		}
	})
	t.Run("--at, overridden", func(t *testing.T) {
		got := loudly(t, s.env, "OLDER THAN", "--at", tomorrow())
		if mark, _ := os.ReadFile(filepath.Join(got, ".homesnap-home.json")); !strings.Contains(string(mark), s.ids[0]) {
			t.Fatalf("the override restored another snapshot than the old head %s: %s", s.ids[0], mark)
		}
	})
}

// untag rewrites a record as a bucket writer can: its tags dropped and
// field changed to value.
func untag(t *testing.T, rec []byte, field, value string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(rec, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "macs")
	m[field] = value
	out, _ := json.Marshal(m)
	return out
}

// TestPointInTimeIsNotSteeredByForgedRecords is issue 31 finding 1's
// second half as the bucket writer: an untagged copy of the middle
// snapshot's record with a forged time (later than --at) or a forged
// parent would make --at skip it for the first snapshot; the restore is
// refused instead (exit 10, the record named), the home untouched, and
// --list marks the forged record and the history below it unverified
// without failing. On the release before, --at restored the first
// snapshot with exit 0 and --list showed the forged record as genuine.
func TestPointInTimeIsNotSteeredByForgedRecords(t *testing.T) {
	s := newSelectionStore(t)
	at := idTime(t, s.ids[1]).Add(time.Millisecond)
	if !idTime(t, s.ids[2]).After(at) {
		t.Skip("the last two snapshots within a millisecond")
	}
	rec := s.bk.load(repo.RecordKey(s.ids[1]))
	for _, c := range []struct{ field, value string }{
		{"time", time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)},
		{"parent", s.ids[0]},
	} {
		t.Run("forged "+c.field, func(t *testing.T) {
			defer s.bk.reset(s.good)
			if c.field == "parent" {
				// The newest record points past the middle one.
				s.bk.put(repo.RecordKey(s.ids[2]), untag(t, s.bk.load(repo.RecordKey(s.ids[2])), "parent", s.ids[0]))
			} else {
				s.bk.put(repo.RecordKey(s.ids[1]), untag(t, rec, c.field, c.value))
			}
			refused(t, s.env, exitUnauthenticated, "not authenticated", "--at", at.Format(time.RFC3339Nano))
		})
	}
	t.Run("--list marks what does not verify", func(t *testing.T) {
		defer s.bk.reset(s.good)
		s.bk.put(repo.RecordKey(s.ids[1]), untag(t, rec, "host", "elsewhere"))
		// A planted record off the history must not stop the listing.
		planted := repo.NewID(time.Now().Add(time.Hour))
		s.bk.put(repo.RecordKey(planted), []byte(`{"id":"`+planted+`","parent":"`+s.ids[2]+`","time":"2100-01-01T00:00:00Z","seq":99}`))
		r := run(t, "homesnap", s.env, "list", "--output", "json")
		if r.code != 0 {
			t.Fatalf("--list: exit %d\n%s", r.code, tail(r.stderr, 2000))
		}
		var recs []struct {
			ID         string `json:"id"`
			Unverified bool   `json:"unverified"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil {
			t.Fatalf("--list --output json: %v\n%s", err, r.stdout)
		}
		got := map[string]bool{}
		for _, e := range recs {
			got[e.ID] = e.Unverified
		}
		want := map[string]bool{s.ids[0]: true, s.ids[1]: true, s.ids[2]: false}
		if len(got) != 3 || got[s.ids[0]] != want[s.ids[0]] || got[s.ids[1]] != want[s.ids[1]] || got[s.ids[2]] != want[s.ids[2]] {
			t.Fatalf("--list marked %v unverified, want %v:\n%s", got, want, r.stdout)
		}
		table := ok(t, run(t, "homesnap", s.env, "list"))
		if !regexp.MustCompile(regexp.QuoteMeta(s.ids[1]) + ` \(unverified\)`).MatchString(table) {
			t.Fatalf("the table does not mark %s unverified:\n%s", s.ids[1], table)
		}
	})
}

// TestRestoreRefusesAHeadBehindTheHomesMark is the one-snapshot rollback
// (issue 31): the bucket writer puts back the head one snapshot older,
// which the store's records cannot prove old (the newest record looks like
// a crashed commit). The sidecar marked the home with the newest commit it
// made, so a restore into that home, plain, partial or --at, refuses with
// exit 12, naming both commits and the override, and leaves the home as
// it was; the override restores the old head, loudly, and marks the home
// with it. On the release before, a plain restore refused the home as
// diverged (exit 3, --force went through) and a partial one restored the
// old head with exit 0.
func TestRestoreRefusesAHeadBehindTheHomesMark(t *testing.T) {
	s := newSelectionStore(t)
	s.rollBack(t, 1)
	before := wholeTree(t, s.home)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"head", nil},
		{"forced", []string{"--force"}},
		{"partial", []string{"--only", "jobs/**"}},
		{"--at", []string{"--at", tomorrow()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, "restore", s.env, append([]string{"--home", s.home, "--timeout", "2m"}, c.args...)...)
			if r.code != exitRollback || !strings.Contains(r.stderr, "commit 2") || !strings.Contains(r.stderr, "commit 3") || !strings.Contains(r.stderr, "--allow-unauthenticated") {
				t.Fatalf("restore %v over a head one snapshot behind the home's mark: exit %d, want %d naming commits 2 and 3 and the override\n%s", c.args, r.code, exitRollback, tail(r.stderr, 2000))
			}
			same(t, "the home after a refused restore", before, wholeTree(t, s.home))
		})
	}
	t.Run("another home", func(t *testing.T) {
		// A home that never saw commit 3 has nothing to compare with: the
		// limit SECURITY.md states.
		target := t.TempDir()
		ok(t, run(t, "restore", s.env, "--home", target, "--timeout", "2m"))
	})
	t.Run("overridden", func(t *testing.T) {
		r := run(t, "restore", s.env, "--home", s.home, "--timeout", "2m", "--allow-unauthenticated", "--force")
		if r.code != 0 || !strings.Contains(r.stderr, "OLDER THAN THIS HOME HAS SEEN") {
			t.Fatalf("restore --allow-unauthenticated: exit %d, want 0 and a warning\n%s", r.code, tail(r.stderr, 2000))
		}
		mark, _ := os.ReadFile(filepath.Join(s.home, ".homesnap-home.json"))
		if !strings.Contains(string(mark), s.ids[1]) || !strings.Contains(string(mark), `"seq": 2`) {
			t.Fatalf("the override did not mark the home with the old head %s and its commit 2:\n%s", s.ids[1], mark)
		}
		// Accepted once: the next restore leaves the home alone.
		if a, _ := outcome(t, run(t, "restore", s.env, "--home", s.home, "--timeout", "2m")); a != "nothing" {
			t.Fatalf("restore after the accepted rollback: %q, want nothing to do", a)
		}
	})
}
