package examples

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestDockerfileStructure lints what the image promises: a multi-stage
// build, a static CGO_ENABLED=0 build, a final stage with no shell (exec-form
// commands only), uid 1000, and the OCI labels.
func TestDockerfileStructure(t *testing.T) {
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	stages := regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(text, -1)
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage build, found %d FROM lines", len(stages))
	}
	if final := stages[len(stages)-1][1]; final != "scratch" && !strings.HasPrefix(final, "gcr.io/distroless/static") {
		t.Errorf("final stage FROM %s: want scratch or distroless/static (no shell)", final)
	}
	if !strings.Contains(text, "CGO_ENABLED=0") {
		t.Error("the build is not CGO_ENABLED=0")
	}
	final := text[strings.LastIndex(text, "\nFROM "):]
	if regexp.MustCompile(`(?m)^RUN `).MatchString(final) {
		t.Error("the final stage has RUN: it has no shell")
	}
	for _, m := range regexp.MustCompile(`(?m)^(CMD|ENTRYPOINT) (.*)$`).FindAllStringSubmatch(final, -1) {
		if !strings.HasPrefix(m[2], "[") {
			t.Errorf("%s %s: use the exec form, there is no shell", m[1], m[2])
		}
	}
	if _, user := dockerfile(t); user != "1000:1000" {
		t.Errorf("USER %s, want 1000:1000 (the Jenkins image's user)", user)
	}
	for _, label := range []string{"title", "description", "source", "version", "revision"} {
		if !strings.Contains(final, "org.opencontainers.image."+label+"=") {
			t.Errorf("no org.opencontainers.image.%s label", label)
		}
	}
}

// TestBinariesAreStatic checks the binary needs no dynamic loader or
// libraries, so it runs on scratch.
func TestBinariesAreStatic(t *testing.T) {
	for _, b := range []string{"homesnap"} {
		f, err := elf.Open(filepath.Join(bin, b))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s has a program interpreter: it is dynamically linked", b)
			}
		}
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("%s needs %v", b, libs)
		}
		f.Close()
	}
}

// TestRunsAsUID1000OnAReadOnlyRoot snapshots and restores as uid 1000 in a
// mount namespace where every filesystem but the work directory is
// read-only, as under readOnlyRootFilesystem: nothing may be written
// outside the home and the store (no temp files, no caches).
func TestRunsAsUID1000OnAReadOnlyRoot(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make a read-only mount namespace and drop to uid 1000")
	}
	for _, tool := range []string{"unshare", "setpriv", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (util-linux)", tool)
		}
	}
	work := t.TempDir()
	home, store, restored := filepath.Join(work, "home"), filepath.Join(work, "store"), filepath.Join(work, "restored")
	for _, d := range []string{home + "/jobs/a/builds/1", home + "/secrets", home + "/nodes/n1", store} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"jobs/a/config.xml":         "<project/>",
		"jobs/a/builds/1/build.xml": "<build/>",
		"secrets/master.key":        "0123456789abcdef",
		"nodes/n1/config.xml":       "<slave/>",
	}
	for p, c := range files {
		if err := os.WriteFile(filepath.Join(home, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := exec.Command("chown", "-R", "1000:1000", work).Run(); err != nil {
		t.Fatal(err)
	}
	os.Chmod(work, 0o755)
	os.Chmod(filepath.Dir(work), 0o755)
	os.Chmod(filepath.Dir(filepath.Dir(work)), 0o755)

	// In a private mount namespace: keep the work directory writable, make
	// every other mount read-only, check / is, then drop to uid 1000 with an
	// empty environment but the store and home.
	script := `set -e
mount --make-rprivate /
mount --bind "$W" "$W"
awk '$4 ~ /^rw/ {print $2}' /proc/self/mounts | while read -r m; do
  case "$m" in "$W"|/proc|/proc/*|/sys|/sys/*|/dev|/dev/*) continue;; esac
  mount -o remount,bind,ro "$m" 2>/dev/null || true
done
if touch /.homesnap-rw-probe 2>/dev/null; then rm -f /.homesnap-rw-probe; echo "/ is still writable" >&2; exit 97; fi
cd /
exec setpriv --reuid=1000 --regid=1000 --clear-groups env -i HOMESNAP_STORE="$W/store" HOMESNAP_LOG_FORMAT=json "$@"`
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("unshare", append([]string{"--mount", "sh", "-c", script, "sh"}, args...)...)
		cmd.Env = append(os.Environ(), "W="+work)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run(filepath.Join(bin, "snapshot"), "--once", "--home", home)
	run(filepath.Join(bin, "restore"), "--home", restored)
	for p, c := range files {
		got, err := os.ReadFile(filepath.Join(restored, p))
		if err != nil || string(got) != c {
			t.Errorf("%s restored as %q (%v), want %q", p, got, err, c)
		}
		if st, err := os.Stat(filepath.Join(restored, p)); err == nil && st.Sys().(*syscall.Stat_t).Uid != 1000 {
			t.Errorf("%s is owned by uid %d, want 1000 (the user that ran the restore)", p, st.Sys().(*syscall.Stat_t).Uid)
		}
	}
}

// TestReleaseDockerfileMatches holds Dockerfile.release (built by
// scripts/image.sh from prebuilt binaries) to the multi-stage Dockerfile's
// final stage: the same labels, environment, user, command and files, in
// the same order; only where the files come from may differ.
func TestReleaseDockerfileMatches(t *testing.T) {
	docker, release := finalStage(t, "../Dockerfile"), finalStage(t, "../Dockerfile.release")
	if strings.Join(docker, "\n") != strings.Join(release, "\n") {
		t.Errorf("the final stages differ:\nDockerfile:\n  %s\nDockerfile.release:\n  %s",
			strings.Join(docker, "\n  "), strings.Join(release, "\n  "))
	}
}

// finalStage returns the instructions of a Dockerfile's last stage,
// normalized so that only what ends up in the image counts: comments and
// line continuations dropped, ARG by name, COPY without --from and with its
// sources' base names. The platform ARGs the release file needs to find
// its binaries are left out.
func finalStage(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`(?m)^\s*#.*\n`).ReplaceAllString(string(data), "")
	text = regexp.MustCompile(`\\\n\s*`).ReplaceAllString(text, " ")
	i := strings.LastIndex(text, "\nFROM ")
	if i < 0 {
		t.Fatalf("%s: no FROM", file)
	}
	var out []string
	for _, line := range strings.Split(text[i+1:], "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "ARG":
			name, _, _ := strings.Cut(f[1], "=")
			if name == "TARGETOS" || name == "TARGETARCH" {
				continue
			}
			f = []string{"ARG", name}
		case "COPY":
			var flags, paths []string
			for _, a := range f[1:] {
				switch {
				case strings.HasPrefix(a, "--from="):
				case strings.HasPrefix(a, "--"):
					flags = append(flags, a)
				default:
					paths = append(paths, a)
				}
			}
			for j := range paths[:len(paths)-1] {
				paths[j] = filepath.Base(paths[j])
			}
			f = append(append([]string{"COPY"}, flags...), paths...)
		}
		out = append(out, strings.Join(f, " "))
	}
	if len(out) < 5 {
		t.Fatalf("%s: the final stage has only %q", file, out)
	}
	return out
}
