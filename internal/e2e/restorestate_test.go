package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// Issue 21, findings 1 and 7: restore state a home writer plants is never
// replayed, and a root restore does not hand out the privileges a store
// records.

// rootBase makes a directory that uid 1000 can traverse, removed at the
// end: t.TempDir's parents are private to root.
func rootBase(t *testing.T, prefix string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the restore runs as root, the home writer as uid 1000")
	}
	base, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(base, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	return base
}

// smallHome writes a few selected files, owned by uid 1000 like a Jenkins
// home's, into a new directory dir.
func smallHome(t *testing.T, dir string, extra map[string]string) {
	t.Helper()
	files := map[string]string{
		"jobs/test/config.xml":     "<project/>\n",
		"jobs/test/builds/1/log":   "Started\n",
		"nodes/agent-1/config.xml": "<slave/>\n",
		"secrets/master.key":       strings.Repeat("ab", 128),
	}
	for k, v := range extra {
		files[k] = v
	}
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("chown", "-R", "1000:1000", dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v\n%s", err, out)
	}
}

// asJenkins runs a shell script as uid 1000 in dir: the home writer.
func asJenkins(t *testing.T, dir, script string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-ec", script)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as uid 1000: %v\n%s", err, out)
	}
}

// TestPlantedRestoreStateIsNeverReplayed: build code running as uid 1000
// plants a staging directory whose journal, if replayed by a root restore,
// would chmod and chown a root-only file outside the home (by an absolute
// path, by "..", through a symlink) and make a root-owned setuid shell in
// the home. Every kind of restore that recovers leftovers first must set
// it aside, say where, and change nothing outside the home.
func TestPlantedRestoreStateIsNeverReplayed(t *testing.T) {
	base := rootBase(t, "homesnap-plant-")
	src, storeDir, outside := filepath.Join(base, "src"), filepath.Join(base, "store"), filepath.Join(base, "outside")
	smallHome(t, src, nil)
	env := []string{"HOMESNAP_STORE=" + storeDir, "HOMESNAP_LOG_FORMAT=json"}
	id1 := ok(t, run(t, "snapshot", env, "--once", "--home", src))
	if err := os.WriteFile(filepath.Join(src, "jobs/test/builds/1/log"), []byte("Started\nFinished\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, run(t, "snapshot", env, "--once", "--home", src))

	secret := filepath.Join(outside, "secret")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("root only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Journal modes are decimal: 2559 is 04777, 3565 is 06755.
	journal := strings.Join([]string{
		`homesnap-journal 1 -`,
		`M "` + secret + `" 1000 1000 2559 0 0`,
		`M "../outside/secret" 1000 1000 2559 0 0`,
		`M "workspace/evil/secret" 1000 1000 2559 0 0`,
		`M "workspace/sh" 0 0 3565 0 0`,
	}, "\n") + "\n"
	plant := `mkdir -p workspace
cp /bin/sh workspace/sh
chmod 755 workspace/sh
ln -s ` + outside + ` workspace/evil
mkdir -m 700 .homesnap-restore-planted .homesnap-restore-planted/tree
cat > .homesnap-restore-planted/journal <<'EOF'
` + journal + `EOF
`
	for _, c := range []struct {
		name  string
		args  []string
		local string // a local change made with the plant
	}{
		{"home behind the head", nil, ""},
		{"snapshot", []string{"--snapshot", "head"}, ""},
		{"at", []string{"--at", "2100-01-01T00:00:00Z"}, ""},
		{"partial", []string{"--only", "jobs/test"}, ""},
		{"forced", []string{"--force", "--snapshot", id1}, "jobs/test/config.xml"},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := filepath.Join(base, strings.ReplaceAll(c.name, " ", "-"))
			if err := os.Mkdir(home, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(home, 1000, 1000); err != nil {
				t.Fatal(err)
			}
			ok(t, run(t, "restore", env, "--home", home, "--snapshot", id1))
			script := plant
			if c.local != "" {
				script += "echo '<changed/>' > " + c.local + "\n"
			}
			asJenkins(t, home, script)

			r := run(t, "restore", env, append([]string{"--home", home}, c.args...)...)
			if r.code != 0 {
				t.Fatalf("restore: exit %d\n%s", r.code, tail(r.stderr, 3000))
			}
			var st syscall.Stat_t
			if err := syscall.Stat(secret, &st); err != nil {
				t.Fatal(err)
			}
			if st.Mode&0o7777 != 0o600 || st.Uid != 0 || st.Gid != 0 {
				t.Errorf("the root-only file outside the home is now %04o %d:%d, want 0600 0:0", st.Mode&0o7777, st.Uid, st.Gid)
			}
			if err := syscall.Lstat(filepath.Join(home, "workspace/sh"), &st); err != nil {
				t.Fatal(err)
			}
			if st.Uid != 1000 {
				t.Errorf("workspace/sh is owned by uid %d now, want 1000", st.Uid)
			}
			filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.Type()&fs.ModeSymlink != 0 || d.IsDir() {
					return err
				}
				if err := syscall.Lstat(p, &st); err == nil && st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
					t.Errorf("%s has mode %04o: a setuid or setgid file in the home", p, st.Mode&0o7777)
				}
				return nil
			})
			if _, err := os.Lstat(filepath.Join(home, ".homesnap-restore-planted")); err == nil {
				t.Error("the planted staging directory is still in place")
			}
			moved, _ := logField(r.stderr, "set aside restore state", "moved_to").(string)
			if !strings.HasPrefix(moved, filepath.Join(home, ".homesnap-quarantine-")) {
				t.Fatalf("no warning naming where the planted directory went (moved_to %q)\n%s", moved, tail(r.stderr, 3000))
			}
			if got, err := os.ReadFile(filepath.Join(moved, "journal")); err != nil || string(got) != journal {
				t.Errorf("the quarantined journal is not the planted one: %v\n%s", err, got)
			}
		})
	}
}

// TestRootRestoreDropsPrivilegedModes: a snapshot holding a root-owned
// file, world-writable paths and setuid/setgid files, restored as root
// without --chown: one warning says owners were applied as stored and how
// many paths lost bits, and nothing in the home is world-writable or
// setuid. With --keep-modes every mode is as stored.
func TestRootRestoreDropsPrivilegedModes(t *testing.T) {
	base := rootBase(t, "homesnap-modes-")
	src, storeDir := filepath.Join(base, "src"), filepath.Join(base, "store")
	smallHome(t, src, map[string]string{"jobs/test/ww.sh": "#!/bin/sh\n", "jobs/test/su": "#!/bin/sh\n", "jobs/test/sg": "#!/bin/sh\n", "jobs/test/root.xml": "<root/>\n"})
	if err := os.Mkdir(filepath.Join(src, "jobs/test/wwdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	stored := map[string]os.FileMode{
		"jobs/test/ww.sh": 0o777, "jobs/test/wwdir": 0o777,
		"jobs/test/su": 0o755 | os.ModeSetuid, "jobs/test/sg": 0o755 | os.ModeSetgid,
	}
	if err := os.Chown(filepath.Join(src, "jobs/test/su"), 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(src, "jobs/test/root.xml"), 0, 0); err != nil {
		t.Fatal(err)
	}
	for rel, m := range stored {
		if err := os.Chmod(filepath.Join(src, rel), m); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"HOMESNAP_STORE=" + storeDir, "HOMESNAP_LOG_FORMAT=json"}
	ok(t, run(t, "snapshot", env, "--once", "--home", src))

	home := filepath.Join(base, "home")
	r := run(t, "restore", env, "--home", home)
	ok(t, r)
	const msg = "restoring as root without --chown"
	if n, _ := logField(r.stderr, msg, "modes_dropped").(float64); n != float64(len(stored)) {
		t.Errorf("warning %q: modes_dropped = %v, want %d\n%s", msg, logField(r.stderr, msg, "modes_dropped"), len(stored), tail(r.stderr, 3000))
	}
	if c := strings.Count(r.stderr, msg); c != 1 {
		t.Errorf("the warning is logged %d times, want once", c)
	}
	filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		if st.Mode&0o002 != 0 || !d.IsDir() && st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
			t.Errorf("%s restored with mode %04o: world-writable, setuid or setgid", p, st.Mode&0o7777)
		}
		return nil
	})
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(home, "jobs/test/root.xml"), &st); err != nil || st.Uid != 0 {
		t.Errorf("root.xml: owner as stored is uid 0, got %d (%v)", st.Uid, err)
	}

	kept := filepath.Join(base, "kept")
	r = run(t, "restore", append(env, "HOMESNAP_KEEP_MODES=true"), "--home", kept)
	ok(t, r)
	for rel, want := range stored {
		fi, err := os.Lstat(filepath.Join(kept, rel))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() & (fs.ModePerm | os.ModeSetuid | os.ModeSetgid); got != want {
			t.Errorf("with --keep-modes, %s is %v, want %v as stored", rel, got, want)
		}
	}
	if !strings.Contains(r.stderr, "--keep-modes") {
		t.Errorf("a root restore keeping modes does not say so:\n%s", tail(r.stderr, 3000))
	}
}

// TestKilledRestoreIsUndoneBeforeTheNextDecision: a restore binary killed
// (SIGKILL) in the middle of its moves leaves a journal; the next restore
// undoes those moves before it decides anything, so the home is back as
// the killed restore found it whatever the decision. (The decision then
// refuses: the moves changed ctimes, so the home no longer matches its
// mark. --force restores the head.)
func TestKilledRestoreIsUndoneBeforeTheNextDecision(t *testing.T) {
	testenv.Long(t, "kills restore binaries until a kill lands mid-commit")
	base := rootBase(t, "homesnap-kill-")
	src, storeDir := filepath.Join(base, "src"), filepath.Join(base, "store")
	jobs := map[string]string{}
	for i := range 3000 {
		jobs[fmt.Sprintf("jobs/j%04d/config.xml", i)] = "<project/>\n"
	}
	smallHome(t, src, jobs)
	env := []string{"HOMESNAP_STORE=" + storeDir, "HOMESNAP_LOG_FORMAT=json"}
	id1 := ok(t, run(t, "snapshot", env, "--once", "--home", src))
	for rel := range jobs {
		if err := os.WriteFile(filepath.Join(src, rel), []byte("<project>2</project>\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ok(t, run(t, "snapshot", env, "--once", "--home", src))
	want := selectedTree(t, src)
	noDirTimes := func(tree testhome.Tree) testhome.Tree {
		for p, a := range tree {
			if a.Type == "d" { // moves change directory mtimes
				a.MTime = 0
				tree[p] = a
			}
		}
		return tree
	}

	for attempt := 1; ; attempt++ {
		if attempt > 20 {
			t.Fatal("no kill landed between the journal's creation and the end of the commit in 20 attempts")
		}
		home := filepath.Join(base, fmt.Sprint("home", attempt))
		ok(t, run(t, "restore", env, "--home", home, "--snapshot", id1))
		before := noDirTimes(selectedTree(t, home))
		p := begin(t, "restore", env, "--home", home)
		var journal string
		for p.running() && journal == "" {
			m, _ := filepath.Glob(filepath.Join(home, ".homesnap-restore-*", "journal"))
			// Kill once a step is recorded (the header is the first line):
			// before that the home is untouched, and the next restore
			// rightly goes on to restore.
			if data, _ := os.ReadFile(firstOf(m)); strings.Count(string(data), "\n") >= 2 {
				p.cmd.Process.Kill()
				journal = m[0]
			}
		}
		p.wait(t, time.Minute)
		if _, err := os.Stat(journal); journal == "" || err != nil {
			continue // the commit finished first
		}
		commitLog, _ := os.ReadFile(journal)
		r := run(t, "restore", env, "--home", home)
		if logField(r.stderr, "undoing the moves of an interrupted restore", "steps") == nil {
			t.Errorf("no interrupted restore was undone (exit %d):\n%s", r.code, tail(r.stderr, 3000))
		}
		same(t, "home after undoing the killed restore", before, noDirTimes(selectedTree(t, home)))
		if t.Failed() { // seen once (2026-12-06): every file left new; what the log held and the undoing restore said
			t.Logf("the killed restore's commit log:\n%s", tail(string(commitLog), 3000))
			t.Logf("the restore after the kill exited %d:\n%s", r.code, tail(r.stderr, 6000))
		}
		if m, _ := filepath.Glob(filepath.Join(home, ".homesnap-restore-*")); len(m) > 0 {
			t.Errorf("left behind: %v", m)
		}
		ok(t, run(t, "restore", env, "--home", home, "--force"))
		same(t, "home restored after the kill", want, selectedTree(t, home))
		t.Logf("killed mid-commit at attempt %d (exit %d after the kill)", attempt, r.code)
		return
	}
}

func firstOf(paths []string) string {
	if len(paths) == 0 {
		return ""
	}
	return paths[0]
}
