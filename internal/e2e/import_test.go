package e2e

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// operatorHome builds a Jenkins home whose jobs/ has the shapes the
// operator's backup meets: builds, a build symlink, a folder with nested
// jobs and branches, workspaces, private and empty files, and one file
// spanning several archive frames. Every mtime is whole seconds, as tar
// keeps them.
func operatorHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	files := map[string]string{
		"jobs/some-job/config.xml":                                 "<project/>", // the operator leaves it out
		"jobs/some-job/nextBuildNumber":                            "3\n",
		"jobs/some-job/builds/1/build.xml":                         "<build><result>SUCCESS</result></build>",
		"jobs/some-job/builds/1/log":                               "Started by user admin\nFinished: SUCCESS\n",
		"jobs/some-job/builds/2/build.xml":                         "<build/>",
		"jobs/some-job/builds/2/changelog.xml":                     "",
		"jobs/some-job/workspace/checkout.txt":                     "not backed up",
		"jobs/orgjob/config.xml":                                   "<folder/>", // left out
		"jobs/orgjob/jobs/branchjob/config.xml":                    "<multibranch/>",
		"jobs/orgjob/jobs/branchjob/branches/main/config.xml":      "<branch/>",
		"jobs/orgjob/jobs/branchjob/branches/main/nextBuildNumber": "8\n",
		"jobs/orgjob/jobs/branchjob/branches/main/workspace@tmp/x": "not backed up",
		"jobs/secret-job/builds/1/injectedEnvVars.txt":             "TOKEN=private",
	}
	for rel, content := range files {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(home, "jobs/secret-job/builds/1/injectedEnvVars.txt"), 0o600)
	os.Chmod(filepath.Join(home, "jobs/secret-job/builds"), 0o750)
	big := make([]byte, 5<<20+123) // more than two frames
	rand.Read(big)
	if err := os.WriteFile(filepath.Join(home, "jobs/some-job/builds/2/archive.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("2", filepath.Join(home, "jobs/some-job/builds/lastSuccessfulBuild")); err != nil {
		t.Fatal(err)
	}
	// Whole seconds, deepest first so a parent's time sticks.
	var paths []string
	filepath.Walk(home, func(p string, _ os.FileInfo, err error) error {
		paths = append(paths, p)
		return err
	})
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for i, p := range slices.Backward(paths) {
		if err := testhome.Lchtimes(p, at.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

// operatorKeeps is what the operator's backup script keeps (tar --exclude
// 'jobs/*/workspace*' unanchored, with wildcards matching '/', then
// --anchored --no-wildcards-match-slash --exclude 'jobs/*/config.xml').
func operatorKeeps(rel string) bool {
	if rel != "jobs" && !strings.HasPrefix(rel, "jobs/") {
		return false
	}
	if regexp.MustCompile(`^jobs/[^/]+/config\.xml$`).MatchString(rel) {
		return false
	}
	return !regexp.MustCompile(`^jobs/.*/workspace`).MatchString(rel)
}

// imported is what an import keeps of the operator's backup: all but
// Jenkins' half-written temp files.
func imported(rel string) bool {
	return operatorKeeps(rel) && !regexp.MustCompile(`-atomic[^/]*tmp$`).MatchString(rel)
}

// operatorBackup writes home's jobs/ as the operator's backup does, with
// each directory's entries in reverse order (tar keeps the readdir order,
// which is not sorted), and returns the .tar.zstd file.
func operatorBackup(t *testing.T, home string) string {
	t.Helper()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	var add func(rel string)
	add = func(rel string) {
		if !operatorKeeps(rel) {
			return
		}
		p := filepath.Join(home, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		link, _ := os.Readlink(p)
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			t.Fatal(err)
		}
		hdr.Name = rel
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Format = tar.FormatGNU
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if fi.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			tw.Write(data)
		}
		if fi.IsDir() {
			des, _ := os.ReadDir(p)
			for _, de := range slices.Backward(des) {
				add(rel + "/" + de.Name())
			}
		}
	}
	add("jobs")
	tw.Close()
	return zstdFile(t, raw.Bytes(), "1.tar.zstd")
}

func zstdFile(t *testing.T, raw []byte, name string) string {
	t.Helper()
	enc, _ := zstd.NewWriter(nil)
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, enc.EncodeAll(raw, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// normalized drops what tar does not keep below a second and the home's
// own mark.
func normalized(tr testhome.Tree) testhome.Tree {
	out := testhome.Tree{}
	for p, a := range tr {
		if strings.HasPrefix(p, ".homesnap-") {
			continue
		}
		a.MTime = a.MTime / 1e9 * 1e9
		out[p] = a
	}
	return out
}

// TestImportOperatorBackup: an operator backup imported into an empty
// store restores into an empty home as exactly the tree the backup holds;
// the sidecar's next snapshot adds the rest of the live home on top.
func TestImportOperatorBackup(t *testing.T) {
	testenv.Long(t, "imports an operator backup through the binaries")
	live := operatorHome(t)
	backup := operatorBackup(t, live)
	storeDir := t.TempDir()

	r := run(t, "snapshot", nil, "--import", backup, "--store", storeDir)
	id := ok(t, r)
	if !strings.Contains(r.stderr, "no nodes/, no secrets/") {
		t.Errorf("the import does not say what the operator's backup lacks:\n%s", r.stderr)
	}
	if l := list(t, storeDir, nil); !l.has(id) {
		t.Fatalf("the store's history lacks the imported snapshot %s", id)
	}

	home := filepath.Join(t.TempDir(), "home")
	ok(t, run(t, "restore", nil, "--home", home, "--store", storeDir))
	want, err := testhome.Read(live, imported)
	if err != nil {
		t.Fatal(err)
	}
	got, err := testhome.Read(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := testhome.Diff(normalized(want), normalized(got)); len(diff) > 0 {
		t.Errorf("restored home differs from the operator's backup:\n%s", strings.Join(diff, "\n"))
	}

	// A second import would bury the history: refused unless asked.
	r = run(t, "snapshot", nil, "--import", backup, "--store", storeDir)
	if r.code != 1 || !strings.Contains(r.stderr, "--import-onto-head") {
		t.Errorf("import into a store with a head: exit %d, want 1 naming --import-onto-head\n%s", r.code, r.stderr)
	}
	if l := list(t, storeDir, nil); len(l.ids) != 1 || l.head != id {
		t.Errorf("the refused import changed the history: %v", l)
	}

	// Combining: the live home (agents, secrets, job configs) on top.
	os.MkdirAll(filepath.Join(home, "secrets"), 0o700)
	os.MkdirAll(filepath.Join(home, "nodes/agent-1"), 0o755)
	os.WriteFile(filepath.Join(home, "secrets/master.key"), bytes.Repeat([]byte("k"), 256), 0o600)
	os.WriteFile(filepath.Join(home, "nodes/agent-1/config.xml"), []byte("<slave/>"), 0o644)
	os.WriteFile(filepath.Join(home, "jobs/some-job/config.xml"), []byte("<project/>"), 0o644)
	next := ok(t, run(t, "snapshot", nil, "--once", "--home", home, "--store", storeDir))
	again := filepath.Join(t.TempDir(), "home")
	ok(t, run(t, "restore", nil, "--home", again, "--store", storeDir, "--snapshot", next))
	for _, rel := range []string{"secrets/master.key", "nodes/agent-1/config.xml", "jobs/some-job/config.xml", "jobs/some-job/builds/2/archive.bin"} {
		if _, err := os.Lstat(filepath.Join(again, rel)); err != nil {
			t.Errorf("after import and a snapshot of the live home, %s is not restored: %v", rel, err)
		}
	}

	// Asked to, an import goes on top; the history stays reachable.
	onto := ok(t, run(t, "snapshot", nil, "--import", backup, "--import-onto-head", "--store", storeDir))
	if l := list(t, storeDir, nil); l.head != onto || !l.has(next) || !l.has(id) {
		t.Errorf("--import-onto-head: history %v, want head %s above %s and %s", l, onto, next, id)
	}
}

// TestImportWithGNUTar imports an archive made by the operator's own
// command line, where tar and zstd are installed.
func TestImportWithGNUTar(t *testing.T) {
	if err := exec.Command("tar", "--zstd", "-cf", filepath.Join(t.TempDir(), "probe.tar.zstd"), "-C", t.TempDir(), ".").Run(); err != nil {
		t.Skipf("no tar with zstd here: %v", err)
	}
	live := operatorHome(t)
	backup := filepath.Join(t.TempDir(), "7.tar.zstd")
	cmd := exec.Command("tar", "--zstd", "-C", live, "-cf", backup,
		"--exclude", "jobs/*/workspace*", "--no-wildcards-match-slash", "--anchored",
		"--ignore-failed-read", "--exclude", "jobs/*/config.xml", "-c", "jobs")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	storeDir := t.TempDir()
	ok(t, run(t, "snapshot", nil, "--import", backup, "--store", storeDir))
	home := filepath.Join(t.TempDir(), "home")
	ok(t, run(t, "restore", nil, "--home", home, "--store", storeDir))
	want, _ := testhome.Read(live, imported)
	got, _ := testhome.Read(home, nil)
	if diff := testhome.Diff(normalized(want), normalized(got)); len(diff) > 0 {
		t.Errorf("restored home differs from GNU tar's operator backup:\n%s", strings.Join(diff, "\n"))
	}
}

// TestImportRefusesHostileArchives: every archive that could write outside
// the home, or holds what a Jenkins home cannot, is refused with its path
// named and leaves the store without a snapshot or a stray object.
func TestImportRefusesHostileArchives(t *testing.T) {
	testenv.Long(t, "imports every hostile archive through the binary")
	file := func(name string) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 1, ModTime: time.Unix(1e9, 0)}
	}
	cases := []struct {
		name    string
		entries []*tar.Header
		want    string
	}{
		{"traversal", []*tar.Header{file("jobs/../../etc/cron.d/x")}, "jobs/../../etc/cron.d/x"},
		{"absolute", []*tar.Header{file("/etc/passwd")}, "/etc/passwd"},
		{"outside jobs", []*tar.Header{file("secrets/master.key")}, "outside jobs/"},
		{"symlink escape", []*tar.Header{{Name: "jobs/a/evil", Typeflag: tar.TypeSymlink, Linkname: "../../../etc", Mode: 0o777}}, "outside the home"},
		{"absolute symlink", []*tar.Header{{Name: "jobs/a/evil", Typeflag: tar.TypeSymlink, Linkname: "/etc", Mode: 0o777}}, "outside the home"},
		{"through a symlink", []*tar.Header{
			{Name: "jobs/a/link", Typeflag: tar.TypeSymlink, Linkname: "b", Mode: 0o777},
			file("jobs/a/link/file"),
		}, "not a directory"},
		{"device", []*tar.Header{{Name: "jobs/a/dev", Typeflag: tar.TypeChar, Mode: 0o644, Devmajor: 1, Devminor: 3}}, "device file"},
		{"hard link", []*tar.Header{file("jobs/a/f"), {Name: "jobs/a/g", Typeflag: tar.TypeLink, Linkname: "jobs/a/f"}}, "hard link"},
		{"duplicate", []*tar.Header{file("jobs/a/f"), file("jobs/a/f")}, "appears twice"},
		{"long name", []*tar.Header{file("jobs/a/" + strings.Repeat("n", 300))}, "longer than"},
		{"setuid", []*tar.Header{{Name: "jobs/a/su", Typeflag: tar.TypeReg, Mode: 0o4755, Size: 1}}, "setuid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var raw bytes.Buffer
			tw := tar.NewWriter(&raw)
			for _, h := range c.entries {
				if err := tw.WriteHeader(h); err != nil {
					t.Fatal(err)
				}
				if h.Size > 0 {
					tw.Write([]byte("x"))
				}
			}
			tw.Close()
			storeDir := t.TempDir()
			r := run(t, "snapshot", nil, "--import", zstdFile(t, raw.Bytes(), "9.tar.zstd"), "--store", storeDir)
			if r.code != 1 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("exit %d, want 1 with %q:\n%s", r.code, c.want, r.stderr)
			}
			if l := list(t, storeDir, nil); len(l.ids) > 0 {
				t.Errorf("a refused import left snapshots %v", l.ids)
			}
			filepath.Walk(storeDir, func(p string, fi os.FileInfo, _ error) error {
				if fi != nil && fi.Mode().IsRegular() && (strings.Contains(p, "archives") || strings.Contains(p, "snapshots")) {
					t.Errorf("a refused import left %s in the store", p)
				}
				return nil
			})
		})
	}
	t.Run("not zstd", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "x.tar")
		os.WriteFile(f, []byte("plain text, no archive"), 0o644)
		if r := run(t, "snapshot", nil, "--import", f, "--store", t.TempDir()); r.code != 1 || !strings.Contains(r.stderr, "N.tar.zstd") {
			t.Errorf("exit %d, want 1 naming the expected N.tar.zstd:\n%s", r.code, r.stderr)
		}
	})
}
