package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/testenv"
)

// The tests of this file play the home writer of SECURITY.md: build code
// running as the Jenkins user (uid 1000) that writes anywhere in the home
// while homesnap, as root, snapshots or restores it.

const jenkinsUID = 1000

// swapAsJenkins exchanges the directory a and the symlink b (renameat2
// RENAME_EXCHANGE: each name always exists) as fast as it can, on a thread
// that runs as the Jenkins user, until the returned stop is called; stop
// returns how many swaps were made.
func swapAsJenkins(t *testing.T, a, b string) (stop func() int) {
	t.Helper()
	done, finished := make(chan struct{}), make(chan error, 1)
	var n int
	go func() {
		// Never unlocked: the thread whose ids change ends with the goroutine.
		runtime.LockOSThread()
		for _, c := range [][4]uintptr{{unix.SYS_SETGROUPS, 0, 0, 0}, {unix.SYS_SETRESGID, jenkinsUID, jenkinsUID, jenkinsUID}, {unix.SYS_SETRESUID, jenkinsUID, jenkinsUID, jenkinsUID}} {
			if _, _, e := unix.RawSyscall(c[0], c[1], c[2], c[3]); e != 0 { // this thread only
				finished <- e
				return
			}
		}
		for {
			select {
			case <-done:
				finished <- nil
				return
			default:
			}
			// A restore may have moved a away, or put a directory of its
			// own there, for a moment: errors only mean no swap.
			if unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE) == nil {
				n++
			}
		}
	}()
	return func() int {
		t.Helper()
		close(done)
		if err := <-finished; err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// writerWorld makes a home owned by the Jenkins user and, beside it, a
// root-only directory standing for the homesnap container's own files.
// It returns the home, that directory and a secret token unique to the test.
func writerWorld(t *testing.T) (home, outside, secret string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as the Jenkins user")
	}
	base, err := os.MkdirTemp("", "homesnap-writer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	home, outside = filepath.Join(base, "home"), filepath.Join(base, "outside")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, jenkinsUID, jenkinsUID); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 16)
	rand.Read(b)
	return home, outside, "homesnap-stolen-" + hex.EncodeToString(b)
}

// writeAs writes files into the home as the Jenkins user would: with
// parents, owned by uid 1000.
func writeAs(t *testing.T, home string, files map[string]string) {
	t.Helper()
	for rel, data := range files {
		p := filepath.Join(home, rel)
		for d := filepath.Dir(p); d != home; d = filepath.Dir(d) {
			defer os.Chown(d, jenkinsUID, jenkinsUID)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chown(p, jenkinsUID, jenkinsUID)
	}
}

// noSecretIn fails if the secret is in any file below dir, after zstd
// decompression of the files that are zstd (archives, manifests), or if
// a manifest records the hash of stolenFile.
func noSecretIn(t *testing.T, dir, secret string, stolen [][]byte) {
	t.Helper()
	var hashes [][]byte
	for _, s := range stolen {
		h := sha256.Sum256(s)
		hashes = append(hashes, []byte(hex.EncodeToString(h[:])))
	}
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if plain, err := dec.DecodeAll(data, nil); err == nil {
			data = plain
		}
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("%s holds the secret from outside the home", p)
		}
		for _, h := range hashes {
			if bytes.Contains(data, h) {
				t.Errorf("%s records the hash of a file from outside the home", p)
				break
			}
		}
		return nil
	})
}

// TestSnapshotReadsOnlyWhatTheWalkSaw: while the home writer swaps a job
// directory for a symlink to a directory outside the home (holding files
// of the same names), snapshots read by path would archive those files.
// No snapshot may hold their bytes, and no restore may put them into the
// home.
func TestSnapshotReadsOnlyWhatTheWalkSaw(t *testing.T) {
	testenv.Long(t, "races a home writer against many snapshots")
	home, outside, secret := writerWorld(t)
	files := map[string]string{}
	var stolen [][]byte
	for i := range 100 {
		rel := fmt.Sprintf("builds/1/archive/f%03d", i)
		files["jobs/x/"+rel] = fmt.Sprintf("inside %d\n", i)
		s := fmt.Sprintf("%s %d\n", secret, i)
		stolen = append(stolen, []byte(s))
		p := filepath.Join(outside, rel)
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeAs(t, home, files)
	plantLink(t, home, "jobs/x.lnk", outside)
	stop := swapAsJenkins(t, filepath.Join(home, "jobs", "x"), filepath.Join(home, "jobs", "x.lnk"))
	defer func() {
		if stop != nil {
			stop()
		}
	}()

	stores := t.TempDir()
	var last string
	for i := range 60 {
		// A fresh store each time: every file is read, not only the changed.
		last = filepath.Join(stores, fmt.Sprint(i))
		os.Mkdir(last, 0o700)
		r := run(t, "snapshot", nil, "--once", "--preset", "all", "--home", home, "--store", last)
		if r.code != 0 {
			t.Errorf("snapshot %d: exit %d\n%s", i, r.code, tail(r.stderr, 2000))
		}
	}
	if n := stop(); n < 1000 {
		t.Fatalf("only %d swaps", n)
	}
	stop = nil
	noSecretIn(t, stores, secret, stolen)

	restored := t.TempDir()
	r := run(t, "restore", nil, "--preset", "all", "--home", restored, "--store", last)
	if r.code != 0 {
		t.Fatalf("restore: exit %d\n%s", r.code, tail(r.stderr, 2000))
	}
	noSecretIn(t, restored, secret, nil)
}

// measured runs a binary under an address-space limit (4 GiB, a safety net: a
// reader gone unbounded fails here instead of taking the machine) and
// returns its result and peak resident memory in MiB. The peak comes from
// GNU time, which forks the binary from its own small process: the rusage
// of a child this test starts directly would report this test process's
// resident size (Go starts children with vfork, and Linux carries the
// parent's high-water mark across the exec).
func measured(t *testing.T, name string, args ...string) (result, int64) {
	t.Helper()
	const gnuTime = "/usr/bin/time"
	if _, err := os.Stat(gnuTime); err != nil {
		t.Fatalf("%s (GNU time) is needed to measure peak memory: apt-get install -y time", gnuTime)
	}
	peak := filepath.Join(t.TempDir(), "peak")
	script := `ulimit -v 4194304 && exec "$0" "$@"`
	cmd := command(gnuTime, nil, append([]string{"-f", "%M", "-o", peak, "/bin/sh", "-c", script, filepath.Join(bin, name)}, args...)...)
	cmd.Path, cmd.Args[0] = gnuTime, gnuTime
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	cmd.Wait()
	data, err := os.ReadFile(peak)
	if err != nil {
		t.Fatalf("%s wrote no peak memory: %v", gnuTime, err)
	}
	fields := strings.Fields(string(data)) // "Command exited with non-zero status N" comes first when it failed
	kb, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
	if err != nil {
		t.Fatalf("%s: unexpected output %q", gnuTime, data)
	}
	return result{cmd.ProcessState.ExitCode(), strings.TrimSpace(out.String()), errb.String()}, kb >> 10
}

// plantLink makes rel a symlink to target, as the Jenkins user would.
func plantLink(t *testing.T, home, rel, target string) {
	t.Helper()
	p := filepath.Join(home, rel)
	for d := filepath.Dir(p); d != home; d = filepath.Dir(d) {
		defer os.Chown(d, jenkinsUID, jenkinsUID)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	os.Lchown(p, jenkinsUID, jenkinsUID)
}

// TestAgentCheckReadsNoLinkAndNoDevice: nodes/evil/config.xml -> /dev/zero
// in the home. The sidecar's check before its snapshot and the restore's
// check before its commit both finish, in bounded memory, with a finding
// naming the file; the snapshot and the restore succeed.
func TestAgentCheckReadsNoLinkAndNoDevice(t *testing.T) {
	home, storeDir, target := agentHome(t), t.TempDir(), filepath.Join(t.TempDir(), "target")
	plantLink(t, home, "nodes/evil/config.xml", "/dev/zero")
	const maxRSS = 300 // MiB; a read of /dev/zero reaches the 4 GiB limit
	for i := range 2 { // the first snapshot has no head to compare with, the second has
		r, rss := measured(t, "snapshot", "--once", "--home", home, "--store", storeDir)
		if r.code != 0 || rss > maxRSS {
			t.Fatalf("snapshot %d: exit %d, %d MiB\n%s", i, r.code, rss, tail(r.stderr, 2000))
		}
		if i == 0 && !strings.Contains(r.stderr, "nodes/evil/config.xml") {
			t.Errorf("snapshot %d does not name nodes/evil/config.xml:\n%s", i, tail(r.stderr, 2000))
		}
		os.WriteFile(filepath.Join(home, "jobs", "touched"), []byte(fmt.Sprint(i)), 0o644)
	}
	r, rss := measured(t, "restore", "--home", target, "--store", storeDir)
	if r.code != 0 || rss > maxRSS {
		t.Fatalf("restore: exit %d, %d MiB\n%s", r.code, rss, tail(r.stderr, 2000))
	}
	if !strings.Contains(r.stderr, "nodes/evil/config.xml") {
		t.Errorf("the restore's agent check does not name nodes/evil/config.xml:\n%s", tail(r.stderr, 2000))
	}
	if link, err := os.Readlink(filepath.Join(target, "nodes/evil/config.xml")); err != nil || link != "/dev/zero" {
		t.Errorf("the snapshot's symlink was not restored as it was: %q, %v", link, err)
	}
}

// TestOwnTemporaryNamesAreNeverWrittenThrough: symlinks planted at
// homesnap's own temporary names (the home mark's, the master key's) lead
// to root-only files outside the home. A root snapshot and a root restore
// with a master key file replace the links and leave those files alone.
func TestOwnTemporaryNamesAreNeverWrittenThrough(t *testing.T) {
	home, outside, _ := writerWorld(t)
	src := agentHome(t)
	if err := os.CopyFS(home, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	master, err := os.ReadFile(filepath.Join(home, "secrets/master.key"))
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "master.key")
	os.WriteFile(keyFile, master, 0o600)
	victims := map[string]string{}
	for _, name := range []string{"mark-victim", "key-victim"} {
		victims[name] = filepath.Join(outside, name)
		if err := os.WriteFile(victims[name], []byte("root only: "+name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	plantLink(t, home, ".homesnap-home.json.tmp", victims["mark-victim"])
	// Snapshotted as a link, restored as one, then the restore installs the key.
	plantLink(t, home, "secrets/.master.key.homesnap-tmp", victims["key-victim"])

	storeDir, target := t.TempDir(), filepath.Join(t.TempDir(), "target")
	ok(t, run(t, "snapshot", nil, "--once", "--exclude-master-key", "--home", home, "--store", storeDir))
	if _, err := os.Stat(filepath.Join(home, ".homesnap-home.json")); err != nil {
		t.Errorf("the home mark was not written: %v", err)
	}
	ok(t, run(t, "restore", nil, "--home", target, "--store", storeDir, "--master-key-file", keyFile))
	for name, p := range victims {
		if got, _ := os.ReadFile(p); string(got) != "root only: "+name {
			t.Errorf("%s, behind a planted link, now holds %q", p, got)
		}
	}
	fi, err := os.Lstat(filepath.Join(target, "secrets/master.key"))
	if got, _ := os.ReadFile(filepath.Join(target, "secrets/master.key")); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || !bytes.Equal(got, master) {
		t.Errorf("secrets/master.key in the restored home: %v, %v, equal %v", fi, err, bytes.Equal(got, master))
	}
}

// TestCommitIsNotRedirectedBySwappedDirectories: a forced partial restore
// of jobs/x into a live home while the Jenkins user keeps swapping jobs/x
// for a symlink to a root-only directory outside the home (holding files
// of the same names). Whether the commit completes or rolls back, none of
// its moves, chowns or chmods may land outside the home. Each round uses
// a fresh home: replaying the journal a failed rollback leaves is the
// restore-state layer's (finding 1), not tested here.
func TestCommitIsNotRedirectedBySwappedDirectories(t *testing.T) {
	testenv.Long(t, "races directory swaps against many restores")
	first, outside, _ := writerWorld(t)
	base := filepath.Dir(first)
	const n = 40
	stored, changed := map[string]string{}, map[string]string{}
	for i := range n {
		rel := fmt.Sprintf("jobs/x/f%03d.xml", i)
		stored[rel], changed[rel] = fmt.Sprintf("<stored %d/>", i), fmt.Sprintf("<local change %d/>", i)
		if err := os.WriteFile(filepath.Join(outside, fmt.Sprintf("f%03d.xml", i)), []byte("root only"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeAs(t, first, stored)
	storeDir := t.TempDir()
	ok(t, run(t, "snapshot", nil, "--once", "--home", first, "--store", storeDir))
	var head struct{ Snapshot string }
	data, _ := os.ReadFile(filepath.Join(storeDir, "head.json"))
	if err := json.Unmarshal(data, &head); err != nil || head.Snapshot == "" {
		t.Fatalf("head.json: %v %s", err, data)
	}
	outsideBefore := wholeTree(t, outside)

	failed := 0
	for i := range 30 {
		home := filepath.Join(base, fmt.Sprintf("home-%d", i))
		os.Mkdir(home, 0o755)
		os.Chown(home, jenkinsUID, jenkinsUID)
		writeAs(t, home, changed)               // every file of jobs/x differs from the snapshot
		plantLink(t, home, "park/lnk", outside) // park is outside the selection
		stop := swapAsJenkins(t, filepath.Join(home, "jobs", "x"), filepath.Join(home, "park", "lnk"))
		// The partial restore of one job's folder, as the runbook says.
		r := run(t, "restore", nil, "--snapshot", head.Snapshot, "--only", "jobs/x", "--force", "--home", home, "--store", storeDir)
		if n := stop(); n < 100 {
			t.Fatalf("only %d swaps during restore %d", n, i)
		}
		if r.code != 0 {
			failed++
			if !strings.Contains(r.stderr, "too many levels of symbolic links") {
				t.Errorf("restore %d failed for another reason than the link: exit %d\n%s", i, r.code, tail(r.stderr, 1000))
			}
		}
		if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("restore %d changed the mode of the directory outside the home: %v %v", i, fi.Mode(), err)
		}
		same(t, fmt.Sprintf("outside the home after restore %d", i), outsideBefore, wholeTree(t, outside))
	}
	t.Logf("%d of 30 restores met a swapped directory and refused it", failed)
}
