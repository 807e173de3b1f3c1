package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestFingerprintSeesEveryKindOfChange: one stat walk tells an unchanged
// home from one where a file was appended to, replaced by rename, removed,
// added, or had its mode changed, each done right after the fingerprint
// (within the same kernel clock tick, where a ctime alone could tie).
func TestFingerprintSeesEveryKindOfChange(t *testing.T) {
	home := newHome(t)
	sel := jenkins(t)
	take := func() Fingerprint {
		t.Helper()
		f, selected, err := TakeFingerprint(context.Background(), home, sel)
		if err != nil || selected == 0 {
			t.Fatalf("fingerprint: %v (%d selected)", err, selected)
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
		before := take()
		if err := c.change(); err != nil {
			t.Fatal(err)
		}
		if got := before.Changed(take()); got != (c.name != "nothing") {
			t.Errorf("%s: Changed = %v", c.name, got)
		}
	}
	empty, selected, err := TakeFingerprint(context.Background(), filepath.Join(t.TempDir(), "none"), sel)
	if err != nil || selected != 0 || empty.Entries != 0 {
		t.Errorf("a missing home: %+v %d %v, want empty", empty, selected, err)
	}
}
