package homemark

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/testhome"
)

// TestFingerprintSeesEveryKindOfChange: one stat walk tells an unchanged
// home from one where a file was appended to, replaced by rename, removed,
// added, or had its mode changed, each done right after the fingerprint
// (within the same kernel clock tick, where a ctime alone could tie).
func TestFingerprintSeesEveryKindOfChange(t *testing.T) {
	home := t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	sel, err := selector.New(selector.Spec{Preset: "jenkins"})
	if err != nil {
		t.Fatal(err)
	}
	take := func() Fingerprint {
		t.Helper()
		f, err := TakeFingerprint(context.Background(), testhome.Open(t, home), sel)
		if err != nil || f.Entries == 0 {
			t.Fatalf("fingerprint: %v (%d entries)", err, f.Entries)
		}
		return f
	}
	p := func(rel string) string { return filepath.Join(home, filepath.FromSlash(rel)) }
	for _, c := range []struct {
		name   string
		change func() error
	}{
		{"nothing", func() error { return nil }},
		{"append", func() error {
			f, err := os.OpenFile(p("jobs/test/config.xml"), os.O_APPEND|os.O_WRONLY, 0)
			if err == nil {
				_, err = f.Write([]byte("<!-- -->"))
				f.Close()
			}
			return err
		}},
		{"replace by rename", func() error {
			if err := os.WriteFile(p("jobs/test/config.xml.tmp"), []byte("<project/>"), 0o644); err != nil {
				return err
			}
			return os.Rename(p("jobs/test/config.xml.tmp"), p("jobs/test/config.xml"))
		}},
		{"remove", func() error { return os.Remove(p("jobs/test/config.xml")) }},
		{"add", func() error { return os.WriteFile(p("jobs/test/new.xml"), nil, 0o644) }},
		{"chmod", func() error { return os.Chmod(p("secrets"), 0o750) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := take()
			if err := c.change(); err != nil {
				t.Fatal(err)
			}
			if got := before.Changed(take()); got != (c.name != "nothing") {
				t.Errorf("Changed = %v", got)
			}
		})
	}
	empty, err := TakeFingerprint(context.Background(), homefs.Missing(filepath.Join(t.TempDir(), "none")), sel)
	if err != nil || empty.Entries != 0 {
		t.Errorf("a missing home: %+v %v, want empty", empty, err)
	}
}

// TestHoldsSelection: a home holds the selection once any path is selected
// itself; directories that only lead to one (or paths outside the
// selection) do not count, nor does a missing home.
func TestHoldsSelection(t *testing.T) {
	sel, err := selector.New(selector.Spec{Preset: "none", Include: []string{"jobs/*/config.xml"}})
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	// Each row adds to the home the rows before it left; only the last
	// adds a selected file, so a row run alone gives the same answer.
	for _, c := range []struct {
		name string
		add  string // a file added to the home, or "" to check it as it is
		want bool
	}{
		{"empty home", "", false},
		{"unselected file", "plugins/git.jpi", false},
		{"beside the selection", "jobs/a/builds/1/log", false}, // jobs/ and jobs/a lead to the selection, hold none of it
		{"selected file", "jobs/a/config.xml", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.add != "" {
				p := filepath.Join(home, filepath.FromSlash(c.add))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := HoldsSelection(context.Background(), testhome.Open(t, home), sel); err != nil || got != c.want {
				t.Errorf("after adding %q: %v, %v; want %v", c.add, got, err, c.want)
			}
		})
	}
	if got, err := HoldsSelection(context.Background(), homefs.Missing(filepath.Join(home, "none")), sel); got || err != nil {
		t.Errorf("a missing home: %v, %v; want false", got, err)
	}
}

// TestHomeMarkIsBoundedAndNeverWrittenThroughALink: a mark that is a link
// to /dev/zero or larger than the bound is damaged, not read forever; a
// link planted at the mark's temporary name is replaced, not written
// through.
func TestHomeMarkIsBoundedAndNeverWrittenThroughALink(t *testing.T) {
	home, outside := t.TempDir(), filepath.Join(t.TempDir(), "root-only")
	if err := os.WriteFile(outside, []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(home, Name)
	os.Symlink("/dev/zero", mark)
	if _, err := Read(testhome.Open(t, home)); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a mark linked to /dev/zero: %v", err)
	}
	os.Remove(mark)
	os.WriteFile(mark, []byte(`{"snapshot":"x","store":"`+strings.Repeat("a", maxSize)+`"}`), 0o644)
	if _, err := Read(testhome.Open(t, home)); err == nil || !strings.Contains(err.Error(), "larger than the limit") {
		t.Fatalf("a mark over the bound: %v", err)
	}
	os.Symlink(outside, mark+".tmp")
	if err := Write(testhome.Open(t, home), &Mark{Snapshot: "s1"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(outside); string(got) != "root only" {
		t.Fatalf("the file behind the planted link became %q", got)
	}
	if m, err := Read(testhome.Open(t, home)); err != nil || m == nil || m.Snapshot != "s1" {
		t.Fatalf("mark read back: %+v, %v", m, err)
	}
	if m, err := Read(homefs.Missing(filepath.Join(home, "none"))); m != nil || err != nil {
		t.Fatalf("no home: %+v, %v", m, err)
	}
}

// TestCarryMovesOnlyTheParentsMark: a mark naming the snapshot a
// consolidation rewrote moves to the consolidated one with its fingerprint
// and selection; a mark naming another snapshot, or none, stays as it is.
func TestCarryMovesOnlyTheParentsMark(t *testing.T) {
	home := t.TempDir()
	walked := &Mark{Store: "file:///s", Snapshot: "s1", Selection: selector.Spec{Preset: "jenkins"},
		Print: Fingerprint{Entries: 578, MaxCTime: 7, Bytes: 9, Inodes: 11}}
	if err := Write(testhome.Open(t, home), walked); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 5, 18, 0, 0, 0, time.UTC)
	if moved, err := Carry(testhome.Open(t, home), "s0", "s2", at, 0); moved || err != nil {
		t.Fatalf("a mark naming s1 carried from s0: %v %v", moved, err)
	}
	if m, err := Read(testhome.Open(t, home)); err != nil || m == nil || m.Snapshot != "s1" {
		t.Fatalf("after carrying from another snapshot: %+v %v, want s1's mark", m, err)
	}
	if moved, err := Carry(testhome.Open(t, home), "s1", "s2", at, 0); !moved || err != nil {
		t.Fatalf("carry from s1: %v %v", moved, err)
	}
	m, err := Read(testhome.Open(t, home))
	if err != nil || m == nil || m.Snapshot != "s2" || !m.Time.Equal(at) || m.Print != walked.Print || m.Selection.Preset != "jenkins" || m.Store != walked.Store {
		t.Fatalf("carried mark %+v %v, want s2 at %v with s1's fingerprint and selection", m, err, at)
	}
	unmarked := t.TempDir()
	if moved, err := Carry(testhome.Open(t, unmarked), "s1", "s2", at, 0); moved || err != nil {
		t.Fatalf("carry in an unmarked home: %v %v", moved, err)
	}
	if m, err := Read(testhome.Open(t, unmarked)); m != nil || err != nil {
		t.Fatalf("an unmarked home got a mark: %+v %v", m, err)
	}
}

// FuzzHomeMarkParse: whatever a home writer puts in the mark, the reader
// returns a mark naming a snapshot or an error, and never panics.
func FuzzHomeMarkParse(f *testing.F) {
	f.Add([]byte(`{"store":"file:///s","snapshot":"20260101T000000.000Z-abcdef","time":"2026-01-01T00:00:00Z","selection":{"preset":"jenkins"},"fingerprint":{"entries":3,"max_ctime":1,"bytes":2,"inode_sum":4}}`))
	f.Add([]byte(`{"snapshot":""}`))
	f.Add([]byte(`{"snapshot":1}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parse(data)
		if err == nil && (m == nil || m.Snapshot == "") {
			t.Fatalf("accepted %q as %+v", data, m)
		}
	})
}
