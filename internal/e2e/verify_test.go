package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/testhome"
)

// problemLines returns the "damaged object" log lines of a verify.
func problemLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, `"message":"damaged object"`) {
			out = append(out, l)
		}
	}
	return out
}

// damagedCopy copies a store directory and breaks it with breakIt.
func damagedCopy(t *testing.T, src string, breakIt func(dir string)) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-a", src+"/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	breakIt(dir)
	return dir
}

func flipByte(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyBackups is the runbook's check: a store that verifies, then
// one damaged object at a time, each named in one log line with exit 6,
// and the structure check finding a missing archive without reading any.
func TestVerifyBackups(t *testing.T) {
	home := buildHome(t, "jobs/test/builds/1/archive/big.bin", 2<<20)
	storeDir := t.TempDir()
	env := []string{"HOMESNAP_LOG_FORMAT=json", "HOMESNAP_HOME=" + home}
	id1 := ok(t, run(t, "snapshot", env, "--once", "--store", storeDir))
	testhome.Change(t, home)
	id2 := ok(t, run(t, "snapshot", env, "--once", "--store", storeDir))
	before := wholeTree(t, home)
	verify := func(dir string, args ...string) result {
		t.Helper()
		// args[0] is the mode: "--verify" or "--verify-structure", as
		// restore's old flags name it.
		cmd := []string{"verify", "--store", dir}
		if args[0] == "--verify-structure" {
			cmd = append(cmd, "--structure")
		}
		r := run(t, "homesnap", env, append(cmd, args[1:]...)...)
		same(t, "the home after a verify", before, wholeTree(t, home))
		return r
	}

	r := verify(storeDir, "--verify")
	if r.code != 0 || r.stdout != "ok\t"+id1+"\nok\t"+id2 {
		t.Fatalf("verify of an intact store: exit %d, stdout %q\n%s", r.code, r.stdout, tail(r.stderr, 2000))
	}
	if n, _ := logField(r.stderr, "verify complete", "snapshots").(float64); n != 2 {
		t.Errorf("summary: %v snapshots", n)
	}
	if r := verify(storeDir, "--verify", "--snapshot", id1); r.code != 0 || r.stdout != "ok\t"+id1 {
		t.Errorf("--verify --snapshot: exit %d, %q", r.code, r.stdout)
	}
	if r := verify(storeDir, "--verify-structure"); r.code != 0 || r.stdout != "ok\t"+id1+"\nok\t"+id2 {
		t.Errorf("--verify-structure: exit %d, %q\n%s", r.code, r.stdout, tail(r.stderr, 2000))
	}

	archive1 := filepath.Join("archives", id1+".tar.zst")
	manifest2 := filepath.Join("snapshots", id2+".json.zst")
	for _, c := range []struct {
		name, object string
		args         []string
		breakIt      func(dir string)
		stdout       string
	}{
		{"flipped byte", archive1, []string{"--verify"}, func(dir string) { flipByte(t, filepath.Join(dir, archive1)) }, "damaged\t" + id1 + "\ndamaged\t" + id2},
		{"deleted archive", archive1, []string{"--verify"}, func(dir string) { os.Remove(filepath.Join(dir, archive1)) }, "damaged\t" + id1 + "\ndamaged\t" + id2},
		{"truncated manifest", manifest2, []string{"--verify"}, func(dir string) {
			p := filepath.Join(dir, manifest2)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/2], 0o644)
		}, "ok\t" + id1 + "\ndamaged\t" + id2},
		{"deleted archive, structure", archive1, []string{"--verify-structure"}, func(dir string) { os.Remove(filepath.Join(dir, archive1)) }, "damaged\t" + id1 + "\ndamaged\t" + id2},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := damagedCopy(t, storeDir, c.breakIt)
			r := verify(dir, c.args...)
			problems := problemLines(r.stderr)
			if r.code != 6 || len(problems) != 1 || !strings.Contains(problems[0], c.object) || r.stdout != c.stdout {
				t.Fatalf("exit %d, stdout %q, problems %q; want exit 6 and one problem naming %s\n%s", r.code, r.stdout, problems, c.object, tail(r.stderr, 3000))
			}
			if n, _ := logField(r.stderr, "verify found problems", "problems").(float64); n != 1 {
				t.Errorf("summary counts %v problems", n)
			}
			if c.args[0] != "--verify-structure" {
				return
			}
			// Only manifests were read: each snapshot reads at most every
			// manifest (a delta reads the ones below it too), far less
			// than one archive.
			manifests, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*.json.zst"))
			var size int64
			for _, m := range manifests {
				fi, _ := os.Stat(m)
				size += fi.Size()
			}
			if read, _ := logField(r.stderr, "verify found problems", "bytes_read").(float64); read <= 0 || int64(read) > 2*size {
				t.Errorf("the structure check read %v bytes; the 2 snapshots' manifests hold %d (the archives more than 2 MiB)", read, size)
			}
		})
	}
}

// A restore that meets a missing archive reports a corrupt snapshot (exit
// 6, the archive named), not a generic failure, and writes nothing.
func TestRestoreOfAMissingArchiveExits6(t *testing.T) {
	home, storeDir := buildHome(t, "", 0), t.TempDir()
	id := ok(t, run(t, "snapshot", nil, "--once", "--home", home, "--store", storeDir))
	archive := filepath.Join("archives", id+".tar.zst")
	if err := os.Remove(filepath.Join(storeDir, archive)); err != nil {
		t.Fatal(err)
	}
	target := t.TempDir()
	r := run(t, "restore", []string{"HOMESNAP_LOG_FORMAT=json"}, "--home", target, "--store", storeDir)
	if r.code != 6 || !strings.Contains(r.stderr, archive) || !strings.Contains(r.stderr, "is missing") {
		t.Fatalf("exit %d, want 6 naming %s:\n%s", r.code, archive, tail(r.stderr, 2000))
	}
	if left := wholeTree(t, target); len(left) > 0 {
		t.Errorf("the failed restore left %d paths in the target", len(left))
	}
}

// An encrypted store verifies with its identity, through the restore's
// ranged reads; a flipped byte fails age's authentication (exit 6).
func TestVerifyEncryptedStore(t *testing.T) {
	home, storeDir := buildHome(t, "", 0), t.TempDir()
	key, recipients, _ := ageKeys(t)
	env := []string{"HOMESNAP_LOG_FORMAT=json", "HOMESNAP_AGE_IDENTITY_FILE=" + key}
	id := ok(t, run(t, "snapshot", env, "--once", "--home", home, "--store", storeDir, "--age-recipients-file", recipients))
	if r := run(t, "homesnap", env, "verify", "--store", storeDir); r.code != 0 || r.stdout != "ok\t"+id {
		t.Fatalf("verify: exit %d, %q\n%s", r.code, r.stdout, tail(r.stderr, 2000))
	}
	archive := filepath.Join("archives", id+".tar.zst.age")
	flipByte(t, filepath.Join(storeDir, archive))
	r := run(t, "homesnap", env, "verify", "--store", storeDir)
	if problems := problemLines(r.stderr); r.code != 6 || len(problems) != 1 || !strings.Contains(problems[0], archive) {
		t.Fatalf("flipped byte: exit %d, problems %q\n%s", r.code, problems, tail(r.stderr, 2000))
	}
}

// Off a terminal the restore logs its progress; the last line's counts are
// the restore's. --progress=off logs none.
func TestRestoreLogsProgress(t *testing.T) {
	home, storeDir := buildHome(t, "", 0), t.TempDir()
	env := []string{"HOMESNAP_LOG_FORMAT=json", "HOMESNAP_STORE=" + storeDir}
	ok(t, run(t, "snapshot", env, "--once", "--home", home))
	r := run(t, "restore", env, "--home", t.TempDir())
	for _, f := range [][2]string{{"files_done", "files"}, {"bytes_done", "bytes"}, {"files_total", "files"}} {
		got, _ := logField(r.stderr, "restore progress", f[0]).(float64)
		want, _ := logField(r.stderr, "restore complete", f[1]).(float64)
		if r.code != 0 || got == 0 || got != want {
			t.Errorf("progress %s = %v, the restore's %s = %v (exit %d)\n%s", f[0], got, f[1], want, r.code, tail(r.stderr, 2000))
		}
	}
	r = run(t, "restore", env, "--home", t.TempDir(), "--progress", "off")
	if r.code != 0 || strings.Contains(r.stderr, "restore progress") {
		t.Errorf("--progress=off: exit %d\n%s", r.code, tail(r.stderr, 2000))
	}
}
