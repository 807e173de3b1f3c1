package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// TestRestorePreset: a store of a controller configured by hand (the
// controller preset) is restored whole only by a restore given the same
// selection, through the same variable the snapshot reads.
func TestRestorePreset(t *testing.T) {
	testenv.Long(t, "restores every preset through the binary")
	home, storeDir := buildHome(t, "", 0), t.TempDir()
	writeRandom(t, home, "credentials.xml", 500)
	writeRandom(t, home, "users/admin/config.xml", 300)
	env := []string{"HOMESNAP_LOG_FORMAT=json", "HOMESNAP_STORE=" + storeDir, "HOMESNAP_PRESET=controller"}
	ok(t, run(t, "snapshot", env, "--once", "--home", home))

	// The default restore changes only the jenkins preset's paths, and says
	// what it left out.
	plain := t.TempDir()
	r := run(t, "restore", env[:2], "--home", plain)
	if r.code != 0 || !strings.Contains(r.stderr, "--preset") {
		t.Fatalf("default restore: exit %d, no hint at --preset:\n%s", r.code, tail(r.stderr, 2000))
	}
	if _, err := os.Stat(filepath.Join(plain, "credentials.xml")); err == nil {
		t.Error("the jenkins preset restored credentials.xml")
	}

	// The same variable as the snapshot's, then the flag.
	for _, c := range []struct {
		env  []string
		args []string
	}{{env, nil}, {env[:2], []string{"--preset", "controller"}}} {
		target := t.TempDir()
		ok(t, run(t, "restore", c.env, append([]string{"--home", target}, c.args...)...))
		sel, _ := selector.New(selector.Spec{Preset: "controller"})
		want, err := testhome.Read(home, func(rel string) bool { return sel.Selected(rel) && !kept(rel) })
		if err != nil {
			t.Fatal(err)
		}
		same(t, "controller restore "+strings.Join(c.args, " "), want, wholeTree(t, target))
	}
	if r := run(t, "restore", env[:2], "--home", t.TempDir(), "--preset", "everything"); r.code != 2 {
		t.Errorf("--preset everything: exit %d, want 2", r.code)
	}
}
