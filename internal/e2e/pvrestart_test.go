package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// runAsJenkins runs a binary as uid 1000, as the init container of the
// examples does (runAsUser: 1000).
func runAsJenkins(t *testing.T, name string, env []string, args ...string) result {
	t.Helper()
	cmd := command(name, env, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	return execute(t, cmd)
}

// TestPVRestartDecidesWithoutAWalk: on a persistent volume whose mark
// names the head, the init container's restore exits 0, writes nothing and
// does not walk the home, unchanged since or not. Build code has left a
// directory the Jenkins user cannot read deep in the selection: a walk
// reports it and fails (the same restore choosing the head by name walks,
// and does), the restore by default never meets it.
func TestPVRestartDecidesWithoutAWalk(t *testing.T) {
	base := rootBase(t, "homesnap-pv-")
	home, storeDir := filepath.Join(base, "home"), filepath.Join(base, "store")
	smallHome(t, home, nil)
	if err := os.Chown(storeDir, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOMESNAP_STORE=" + storeDir, "HOMESNAP_LOG_FORMAT=json"}
	id := ok(t, runAsJenkins(t, "snapshot", env, "--once", "--home", home))

	// state is what a write anywhere in the home would change: the tree,
	// the mark (replaced by rename: a new inode, a new ctime) and the
	// home directory itself.
	type state struct {
		mark, root unix.Stat_t
	}
	stateOf := func() state {
		var s state
		if err := unix.Lstat(filepath.Join(home, ".homesnap-home.json"), &s.mark); err != nil {
			t.Fatal(err)
		}
		if err := unix.Lstat(home, &s.root); err != nil {
			t.Fatal(err)
		}
		return s
	}
	leftAlone := func(what string) {
		t.Helper()
		tree, before := wholeTree(t, home), stateOf()
		r := runAsJenkins(t, "restore", env, "--home", home)
		if action, got := outcome(t, r); r.code != 0 || action != "nothing" || got != id {
			t.Fatalf("%s: exit %d, %q %q; want exit 0, nothing %s\n%s", what, r.code, action, got, id, tail(r.stderr, 3000))
		}
		msg := "nothing to do"
		if walked, _ := logField(r.stderr, msg, "walked").(bool); walked || logField(r.stderr, msg, "walked") == nil {
			t.Errorf("%s: the decision's log line says walked=%v; want false\n%s", what, logField(r.stderr, msg, "walked"), tail(r.stderr, 3000))
		}
		if reason, _ := logField(r.stderr, msg, "reason").(string); !strings.Contains(reason, "mark names the head") || !strings.Contains(reason, "not walked") {
			t.Errorf("%s: reason %q does not say the mark names the head and the home was not walked", what, reason)
		}
		same(t, what+": the home", tree, wholeTree(t, home))
		after := stateOf()
		if after.mark.Ino != before.mark.Ino || after.mark.Ctim != before.mark.Ctim || after.root.Mtim != before.root.Mtim || after.root.Ctim != before.root.Ctim {
			t.Errorf("%s: the mark or the home directory changed (mark inode %d→%d, home mtime %v→%v)", what, before.mark.Ino, after.mark.Ino, before.root.Mtim, after.root.Mtim)
		}
	}
	leftAlone("the pod restarts, nothing changed since the snapshot")

	// Before the restart, a build created a job and left a directory
	// nobody may read or enter.
	asJenkins(t, home, `mkdir -p jobs/after-snapshot && echo '<project/>' > jobs/after-snapshot/config.xml
mkdir -p jobs/test/builds/2/archive && chmod 000 jobs/test/builds/2`)
	leftAlone("the pod restarts, the home changed since")

	// A walk meets that directory: naming the head snapshot makes the
	// restore walk (a chosen snapshot is not skipped for local changes),
	// and the walk fails there. The home stays as it was.
	tree := wholeTree(t, home)
	r := runAsJenkins(t, "restore", env, "--home", home, "--snapshot", id)
	if r.code == 0 || !strings.Contains(r.stderr, "jobs/test/builds/2") || !strings.Contains(r.stderr, "permission denied") {
		t.Errorf("a walk over the unreadable directory: exit %d; want a failure naming jobs/test/builds/2\n%s", r.code, tail(r.stderr, 3000))
	}
	same(t, "the home after the walking restore failed", tree, wholeTree(t, home))
}
