package e2e

import (
	"strings"
	"testing"
)

// TestDeprecatedNamesStillWork: a restore configured with the names issue
// 22 renamed (restore's --include and HOMESNAP_RESTORE_INCLUDE, now --only
// and HOMESNAP_ONLY) still does the partial restore it asked for, and says
// once which name to use instead.
func TestDeprecatedNamesStillWork(t *testing.T) {
	home, storeDir := buildHome(t, "", 0), t.TempDir()
	env := []string{"HOMESNAP_STORE=" + storeDir, "HOMESNAP_LOG_FORMAT=json"}
	ok(t, run(t, "snapshot", env, "--once", "--home", home))
	for _, c := range []struct {
		name, warning string
		env, args     []string
	}{
		{"old variable", "HOMESNAP_RESTORE_INCLUDE is deprecated: set HOMESNAP_ONLY", []string{"HOMESNAP_RESTORE_INCLUDE=jobs/test"}, nil},
		{"old flag", "--include is deprecated: use --only", nil, []string{"--include", "jobs/test"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := t.TempDir()
			r := run(t, "restore", append(c.env, env...), append([]string{"--home", target}, c.args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d:\n%s", r.code, tail(r.stderr, 2000))
			}
			if n := strings.Count(r.stderr, c.warning); n != 1 {
				t.Errorf("%d warnings %q, want 1:\n%s", n, c.warning, tail(r.stderr, 2000))
			}
			tree := wholeTree(t, target)
			if len(tree) == 0 {
				t.Fatal("nothing restored")
			}
			for p := range tree {
				if p != "jobs" && p != "jobs/test" && !strings.HasPrefix(p, "jobs/test/") && !strings.HasPrefix(p, ".homesnap") {
					t.Errorf("a partial restore of jobs/test wrote %s", p)
				}
			}
		})
	}
	// Both names of one flag: a usage error, nothing restored.
	if r := run(t, "restore", env, "--home", t.TempDir(), "--include", "jobs/a", "--only", "jobs/b"); r.code != 2 || !strings.Contains(r.stderr, "--only") {
		t.Errorf("--include with --only: exit %d, want 2 naming --only:\n%s", r.code, r.stderr)
	}
}

// TestHelpListsVersionAndTheNewNames: every binary's --help lists --version
// next to its flags, and --version answers.
func TestHelpListsVersionAndTheNewNames(t *testing.T) {
	for _, name := range []string{"snapshot", "restore", "prune"} {
		r := run(t, name, nil, "--help")
		if r.code != 0 || !strings.Contains(r.stderr, "\n  --version\n") || !strings.Contains(r.stderr, "HOMESNAP_TIMEOUT") {
			t.Errorf("%s --help (exit %d) does not list --version and --timeout:\n%s", name, r.code, r.stderr)
		}
		if v := run(t, name, nil, "--version"); v.code != 0 || !strings.HasPrefix(v.stdout, name) {
			t.Errorf("%s --version: exit %d, %q", name, v.code, v.stdout)
		}
	}
}

// TestOneBinary: homesnap runs each command by its name, and, through the
// links the image ships, by the link's name; a mode variable an earlier
// release read is refused before anything is done.
func TestOneBinary(t *testing.T) {
	home, storeDir := buildHome(t, "", 0), t.TempDir()
	env := []string{"HOMESNAP_STORE=" + storeDir}
	id := ok(t, run(t, "homesnap", env, "snapshot", "--once", "--home", home))
	if out := ok(t, run(t, "homesnap", env, "list")); !strings.Contains(out, id) {
		t.Errorf("homesnap list does not show %s:\n%s", id, out)
	}
	target := t.TempDir()
	r := run(t, "homesnap", append(env, "HOMESNAP_VERIFY=true"), "restore", "--home", target)
	if r.code != 2 || !strings.Contains(r.stderr, "HOMESNAP_VERIFY is set") || len(wholeTree(t, target)) != 0 {
		t.Errorf("restore with HOMESNAP_VERIFY=true: exit %d, want 2 with nothing restored:\n%s", r.code, r.stderr)
	}
	ok(t, run(t, "restore", env, "--home", target)) // the link
	if len(wholeTree(t, target)) == 0 {
		t.Error("restore through its link restored nothing")
	}
	if r := run(t, "homesnap", nil, "frobnicate"); r.code != 2 || !strings.Contains(r.stderr, `unknown command "frobnicate"`) {
		t.Errorf("homesnap frobnicate: exit %d\n%s", r.code, r.stderr)
	}
}
