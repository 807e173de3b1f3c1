package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/testhome"
)

var bin string // directory holding homesnap and its links restore, snapshot and prune

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "homesnap-bin-")
	if err != nil {
		panic(err)
	}
	os.Chmod(dir, 0o755)
	// Built and installed as the release ships it (.goreleaser.yaml,
	// scripts/image.sh): one homesnap binary, and restore, snapshot and
	// prune as links to it.
	build := exec.Command("go", "build", "-trimpath", "-o", dir, "github.com/homesnap/homesnap/cmd/homesnap")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build binaries:", err)
		os.Exit(1)
	}
	for _, name := range []string{"restore", "snapshot", "prune"} {
		if err := os.Symlink("homesnap", filepath.Join(dir, name)); err != nil {
			fmt.Fprintln(os.Stderr, "link binaries:", err)
			os.Exit(1)
		}
	}
	bin = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

// run executes a binary with a clean HOMESNAP_* environment plus env.
func run(t *testing.T, name string, env []string, args ...string) result {
	t.Helper()
	return execute(t, command(name, env, args...))
}

// execute runs cmd to its end and returns its exit status and output.
func execute(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, strings.TrimSpace(out.String()), errb.String()}
}

func ok(t *testing.T, r result) string {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
	}
	return r.stdout
}

func selectedTree(t *testing.T, home string) testhome.Tree {
	t.Helper()
	sel, _ := selector.New(selector.Spec{Preset: "jenkins"})
	tree, err := testhome.Read(home, sel.Selected)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// wholeTree reads everything under dir except what restores and snapshots
// keep there on purpose: the home's mark and what a forced restore
// displaced (tests that care look at those directly).
func wholeTree(t *testing.T, dir string) testhome.Tree {
	t.Helper()
	tree, err := testhome.Read(dir, func(rel string) bool { return !kept(rel) })
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// kept reports whether rel is the home's mark or inside a displaced
// directory (at the home's root).
func kept(rel string) bool {
	top, _, _ := strings.Cut(rel, "/")
	return top == ".homesnap-home.json" || strings.HasPrefix(top, ".homesnap-displaced-")
}

func same(t *testing.T, what string, want, got testhome.Tree) {
	t.Helper()
	if d := testhome.Diff(want, got); len(d) > 0 {
		if len(d) > 15 {
			d = append(d[:15], "...")
		}
		t.Fatalf("%s differs:\n%s", what, strings.Join(d, "\n"))
	}
}

// TestSnapshotChangeSnapshotRestoreEach is the user's story: snapshot a
// home, let Jenkins change it, snapshot again, and restore each snapshot
// into an empty directory with every attribute intact.
func TestSnapshotChangeSnapshotRestoreEach(t *testing.T) {
	home, storeDir := t.TempDir(), t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	// First through the environment (JENKINS_HOME as the home), ...
	id1 := ok(t, run(t, "snapshot", []string{"JENKINS_HOME=" + home, "HOMESNAP_STORE=" + storeDir, "HOMESNAP_ONCE=true"}))
	want1 := selectedTree(t, home)
	testhome.Change(t, home)
	want2 := selectedTree(t, home)
	// ... then through flags, which win over a wrong environment.
	id2 := ok(t, run(t, "snapshot", []string{"HOMESNAP_HOME=/nonexistent", "HOMESNAP_STORE=/nonexistent"},
		"--once", "--home", home, "--store", "file://"+storeDir))
	if id1 == "" || id2 == "" || id1 == id2 {
		t.Fatalf("snapshot IDs %q and %q", id1, id2)
	}
	list := ok(t, run(t, "homesnap", nil, "list", "--store", storeDir))
	if !strings.Contains(list, id1) || !strings.Contains(list, id2+" (head)") {
		t.Fatalf("--list:\n%s", list)
	}
	for _, c := range []struct {
		args []string
		want testhome.Tree
	}{
		{[]string{"--snapshot", id1}, want1},
		{[]string{"--snapshot", id2}, want2},
		{nil, want2}, // the newest by default
	} {
		target := t.TempDir()
		ok(t, run(t, "restore", []string{"HOMESNAP_HOME=" + target, "HOMESNAP_STORE=" + storeDir}, c.args...))
		same(t, fmt.Sprintf("restore %v", c.args), c.want, wholeTree(t, target))
	}
}

func TestHelpDocumentsEnvironment(t *testing.T) {
	for _, name := range []string{"snapshot", "restore"} {
		r := run(t, name, nil, "--help")
		if r.code != 0 || !strings.Contains(r.stderr, "HOMESNAP_HOME") || !strings.Contains(r.stderr, "HOMESNAP_STORE") || !strings.Contains(r.stderr, "JENKINS_HOME") {
			t.Errorf("%s --help (exit %d) does not document the variables:\n%s", name, r.code, r.stderr)
		}
	}
	if r := run(t, "snapshot", nil, "--bogus"); r.code != 2 {
		t.Errorf("unknown flag: exit %d, want 2", r.code)
	}
}

func TestUserMistakesGetOneClearMessage(t *testing.T) {
	home := t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "no-such-store")
	cases := []struct {
		name, bin string
		args      []string
		want      string
	}{
		{"missing store", "snapshot", []string{"--once", "--home", home, "--store", missing}, "mkdir -p"},
		{"no store", "restore", []string{"--home", home}, "HOMESNAP_STORE"},
		{"unknown scheme", "restore", []string{"--home", home, "--store", "ftp://x/y"}, "unknown scheme"},
		{"bad snapshot id", "restore", []string{"--home", home, "--store", t.TempDir(), "--snapshot", "../../etc"}, "malformed"},
		{"empty store", "restore", []string{"--home", home, "--store", t.TempDir()}, "no snapshot"},
		{"missing home", "snapshot", []string{"--once", "--home", "/nonexistent/home", "--store", t.TempDir()}, "/nonexistent/home"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, c.bin, nil, c.args...)
			if r.code == 0 {
				t.Fatalf("exit 0, want failure")
			}
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr does not say %q:\n%s", c.want, r.stderr)
			}
		})
	}
	if r := run(t, "restore", nil, "--home", t.TempDir(), "--store", t.TempDir(), "--allow-empty"); r.code != 0 {
		t.Errorf("--allow-empty on an empty store: exit %d: %s", r.code, r.stderr)
	}
}

// TestUnreadableFileFailsTheSnapshot runs the snapshot as an unprivileged
// user over a home holding a file it cannot read.
func TestUnreadableFileFailsTheSnapshot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the snapshot as another user")
	}
	base, err := os.MkdirTemp("", "homesnap-perm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	os.Chmod(base, 0o755)
	home, storeDir := filepath.Join(base, "home"), filepath.Join(base, "store")
	for _, d := range []string{home + "/jobs/a", home + "/secrets", storeDir} {
		os.MkdirAll(d, 0o777)
		os.Chmod(d, 0o777)
	}
	os.WriteFile(home+"/jobs/a/config.xml", []byte("<x/>"), 0o644)
	os.WriteFile(home+"/secrets/master.key", []byte("k"), 0o600) // root's, unreadable to nobody
	cmd := exec.Command(filepath.Join(bin, "snapshot"), "--once", "--home", home, "--store", storeDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("snapshot succeeded with an unreadable file:\n%s", out)
	}
	if !strings.Contains(string(out), "secrets/master.key") || !strings.Contains(string(out), "permission denied") {
		t.Errorf("error does not name the file and the cause:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(storeDir, "head.json")); err == nil {
		t.Error("a snapshot was committed despite the error")
	}

	// A store the user cannot write to.
	os.Remove(home + "/secrets/master.key")
	readOnly := filepath.Join(base, "read-only-store")
	os.Mkdir(readOnly, 0o755) // root's
	cmd = exec.Command(filepath.Join(bin, "snapshot"), "--once", "--home", home, "--store", readOnly)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), readOnly) || !strings.Contains(string(out), "permission denied") {
		t.Errorf("unwritable store: err=%v, output does not name the store and the cause:\n%s", err, out)
	}
}

// TestSidecarTakesAFinalSnapshotOnSIGTERM runs the snapshot command as a
// sidecar, changes the home, stops it like Kubernetes does, and checks that
// the change is in the store.
func TestSidecarTakesAFinalSnapshotOnSIGTERM(t *testing.T) {
	home, storeDir := t.TempDir(), t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "snapshot"), "--home", home, "--store", storeDir, "--interval", "1h", "--listen", "off", "--log-format", "json")
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the first snapshot, then let Jenkins change the home.
	for i := 0; !strings.Contains(errb.String(), "snapshot committed"); i++ {
		if i > 600 {
			cmd.Process.Kill()
			t.Fatalf("no first snapshot:\n%s", errb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	testhome.Change(t, home)
	want := selectedTree(t, home)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sidecar exit: %v\n%s", err, errb.String())
	}
	if n := strings.Count(out.String(), "\n"); n != 2 {
		t.Fatalf("want 2 snapshots (first and final), got %d:\n%s", n, out.String())
	}
	target := t.TempDir()
	ok(t, run(t, "restore", nil, "--home", target, "--store", storeDir))
	same(t, "restore of the final snapshot", want, wholeTree(t, target))
}

// syncBuffer is a bytes.Buffer safe to read while a process writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
