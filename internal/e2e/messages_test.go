package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/testenv"
)

// Messages an operator meets at 3 a.m. say what is wrong with the input,
// not something else (issue 30, item 6). Each fails on the old main.
func TestMistakesAreNamedForWhatTheyAre(t *testing.T) {
	testenv.Long(t, "runs the binaries through every mistake")
	storeDir := t.TempDir()
	env := []string{"HOMESNAP_STORE=" + storeDir}
	home := buildHome(t, "", 0)
	id := ok(t, run(t, "snapshot", env, "--once", "--home", home))

	t.Run("a snapshot ID that does not exist", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "home")
		missing := "20990101T000000.000Z-abcdef"
		r := run(t, "restore", env, "--snapshot", missing, "--home", target)
		if r.code != 4 || !strings.Contains(r.stderr, "no snapshot "+missing) || strings.Contains(r.stderr, "corrupt") {
			t.Fatalf("exit %d, want 4 saying there is no snapshot %s (the store is intact)\n%s", r.code, missing, tail(r.stderr, 1500))
		}
		if _, err := os.Stat(target); !os.IsNotExist(err) {
			t.Errorf("the home was created or changed: %v", err)
		}
	})

	t.Run("an --only pattern that matches nothing", func(t *testing.T) {
		r := run(t, "restore", env, "--only", "jobs/nonexistent", "--home", t.TempDir())
		if r.code != 2 || !strings.Contains(r.stderr, "--only jobs/nonexistent matched nothing in snapshot "+id) {
			t.Fatalf("exit %d, want 2 saying the pattern matched nothing\n%s", r.code, tail(r.stderr, 1500))
		}
	})

	t.Run("a timeout names --timeout whatever the step", func(t *testing.T) {
		for range 10 { // the deadline strikes at a different step each time
			r := run(t, "restore", env, "--timeout", "1ns", "--home", filepath.Join(t.TempDir(), "home"))
			if r.code != 5 || !strings.Contains(r.stderr, "gave up after 1ns (--timeout) while") {
				t.Fatalf("exit %d, want 5 naming --timeout and the step\n%s", r.code, tail(r.stderr, 1500))
			}
		}
	})

	t.Run("a lease that cannot be taken is not blamed on a sidecar", func(t *testing.T) {
		r := run(t, "snapshot", env, "--once", "--timeout", "1ns", "--home", home)
		if r.code == 0 || strings.Contains(r.stderr, "running sidecar") || !strings.Contains(r.stderr, "deadline exceeded") {
			t.Fatalf("exit %d, want a failure naming the deadline, not a sidecar\n%s", r.code, tail(r.stderr, 1500))
		}
	})
}
