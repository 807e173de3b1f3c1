package gen

import (
	"bytes"
	"compress/flate"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func generate(t *testing.T, preset string, seed int64) (string, Stats) {
	t.Helper()
	return generateWith(t, Options{Preset: preset, Seed: seed})
}

func generateWith(t *testing.T, opt Options) (string, Stats) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "home")
	st, err := Generate(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	return dir, st
}

func TestGenerateIsDeterministic(t *testing.T) {
	// The number of writers must not matter either.
	a, sa := generateWith(t, Options{Preset: "tiny", Seed: 7, Workers: 1})
	b, sb := generateWith(t, Options{Preset: "tiny", Seed: 7, Workers: 4})
	if sa != sb {
		t.Fatalf("stats differ: %v vs %v", sa, sb)
	}
	diffs, err := Compare(a, b, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) > 0 {
		t.Fatalf("same seed, %d differences, first: %s", len(diffs), diffs[0])
	}
	c, _ := generate(t, "tiny", 8)
	diffs, err = Compare(a, c, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) == 0 {
		t.Fatal("different seeds gave identical trees")
	}
}

func TestGenerateStatsMatchTree(t *testing.T) {
	dir, st := generate(t, "tiny", 1)
	entries, err := Scan(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got Stats
	for _, e := range entries {
		switch {
		case e.Mode.IsDir():
			got.Dirs++
		case e.Mode&fs.ModeSymlink != 0:
			got.Symlinks++
		default:
			got.Files++
			got.Bytes += e.Size
		}
	}
	if got != st {
		t.Fatalf("Generate reported %v, tree holds %v", st, got)
	}
	if st.Files < 150 || st.Files > 400 {
		t.Errorf("tiny has %d files, want about 200", st.Files)
	}
}

func TestGenerateRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(dir, Options{Preset: "tiny"}); err == nil {
		t.Fatal("generated into a non-empty directory")
	}
	if _, err := Generate(t.TempDir(), Options{Preset: "huge"}); err == nil {
		t.Fatal("accepted an unknown preset")
	}
}

func TestCustomPreset(t *testing.T) {
	p, err := LookupPreset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	p.Freestyle, p.Builds = 5, 1
	dir := filepath.Join(t.TempDir(), "home")
	if _, err := Generate(dir, Options{Custom: &p, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	jobs, _ := filepath.Glob(filepath.Join(dir, "jobs", "*", "config.xml"))
	if len(jobs) < 5 {
		t.Fatalf("custom preset: %d top-level items", len(jobs))
	}
}

// checkFile asserts rel's mode and size.
func checkFile(t *testing.T, root, rel string, mode fs.FileMode, size int64) {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(root, rel))
	if err != nil {
		t.Error(err)
		return
	}
	if fi.Mode() != mode || (size >= 0 && fi.Size() != size) {
		t.Errorf("%s: mode %v size %d, want %v %d", rel, fi.Mode(), fi.Size(), mode, size)
	}
}

func TestSecretsAndRoot(t *testing.T) {
	dir, _ := generate(t, "tiny", 1)
	checkFile(t, dir, "secrets", fs.ModeDir|0o700, -1)
	checkFile(t, dir, "identity.key.enc", 0o600, 1680)
	sizes := map[string]int64{
		"secrets/master.key":         256,
		"secrets/hudson.util.Secret": 272,
		"secrets/org.jenkinsci.main.modules.instance_identity.InstanceIdentity.KEY": 272,
		"secrets/jenkins.slaves.JnlpSlaveAgentProtocol.secret":                      48,
		"secrets/jenkins.security.ApiTokenProperty.seed":                            48,
		"secrets/jenkins.model.Jenkins.crumbSalt":                                   32,
		"secrets/hudson.console.ConsoleNote.MAC":                                    48,
		"secret.key":                                                                64,
		"secret.key.not-so-secret":                                                  0,
	}
	for rel, size := range sizes {
		checkFile(t, dir, rel, 0o644, size)
	}
	checkFile(t, dir, "secrets/initialAdminPassword", 0o600, 33)
	for _, rel := range []string{"secrets/master.key", "secret.key"} {
		data, _ := os.ReadFile(filepath.Join(dir, rel))
		if !regexp.MustCompile(`^[0-9a-f]+$`).Match(data) {
			t.Errorf("%s is not bare hex: %q", rel, data)
		}
	}
	for _, rel := range []string{"secrets/filepath-filters.d/30-default.conf", "secrets/whitelisted-callables.d/default.conf",
		"config.xml", "credentials.xml", "hudson.model.UpdateCenter.xml", "queue.xml", "nodeMonitors.xml", "jenkins.telemetry.Correlator.xml"} {
		checkFile(t, dir, rel, 0o644, -1)
	}
	var launchers []string
	nodes, _ := filepath.Glob(filepath.Join(dir, "nodes", "*", "config.xml"))
	for _, n := range nodes {
		data, _ := os.ReadFile(n)
		name := filepath.Base(filepath.Dir(n))
		if !strings.Contains(string(data), "<name>"+name+"</name>") {
			t.Errorf("%s does not name its node", n)
		}
		launchers = append(launchers, regexp.MustCompile(`<launcher class="([^"]+)"`).FindStringSubmatch(string(data))[1])
	}
	for _, want := range []string{"hudson.slaves.JNLPLauncher", "hudson.plugins.sshslaves.SSHLauncher", "org.csanchez.jenkins.plugins.kubernetes.KubernetesLauncher"} {
		if !strings.Contains(strings.Join(launchers, " "), want) {
			t.Errorf("no agent with launcher %s (have %v)", want, launchers)
		}
	}
}

// features collects the edge cases found while walking a home.
type features map[string]bool

func TestStructure(t *testing.T) {
	dir, _ := generate(t, "tiny", 1)
	entries, err := Scan(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := features{}
	hasChildren := map[string]bool{}
	for rel := range entries {
		hasChildren[path.Dir(rel)] = true
	}
	lo, hi := epoch, epoch.Add(horizon)
	for rel, e := range entries {
		base := path.Base(rel)
		for _, c := range strings.Split(rel, "/") {
			if len(c) > 255 {
				t.Errorf("component longer than 255 bytes: %s", c)
			}
			f["component of 255 bytes"] = f["component of 255 bytes"] || len(c) == 255
		}
		if !utf8.ValidString(rel) {
			t.Errorf("invalid UTF-8 name %q", rel)
		}
		if e.Mtime.Before(lo) || !e.Mtime.Before(hi) {
			t.Errorf("%s: mtime %v outside the generated history", rel, e.Mtime)
		}
		if e.Mode.IsRegular() && e.Mtime.Nanosecond()%1000 != 0 {
			f["nanosecond mtimes"] = true
		}
		f["path over 255 bytes"] = f["path over 255 bytes"] || len(rel) > 255
		f["zero-byte file"] = f["zero-byte file"] || (e.Mode.IsRegular() && e.Size == 0)
		f["empty dir"] = f["empty dir"] || (e.Mode.IsDir() && !hasChildren[rel])
		f["unicode job"] = f["unicode job"] || rel == "jobs/déploiement-生产/config.xml"
		f["emoji branch"] = f["emoji branch"] || (strings.Contains(rel, "/branches/") && strings.Contains(rel, "🚀"))
		f["nested folders"] = f["nested folders"] || regexp.MustCompile(`^jobs/[^/]+/jobs/[^/]+/jobs/[^/]+/config.xml$`).MatchString(rel)
		f["workflow/N.xml"] = f["workflow/N.xml"] || regexp.MustCompile(`/builds/\d+/workflow/\d+\.xml$`).MatchString(rel)
		f["flowNodeStore.xml"] = f["flowNodeStore.xml"] || strings.HasSuffix(rel, "/workflow-completed/flowNodeStore.xml")
		f["atomic temp file"] = f["atomic temp file"] || regexp.MustCompile(`/config\.xml-atomic\d+tmp$`).MatchString(rel)
		f["executable"] = f["executable"] || (e.Mode.IsRegular() && e.Mode&0o111 != 0)
		if e.Mode&fs.ModeSymlink != 0 {
			if _, err := os.Stat(filepath.Join(dir, rel)); err != nil {
				f["dangling symlink"] = true
			}
			f["-1 symlink"] = f["-1 symlink"] || (base == "lastFailedBuild" && e.Target == "-1") || (strings.HasPrefix(base, "last") && e.Target == "-1")
			f["lastSuccessful link"] = f["lastSuccessful link"] || (base == "lastSuccessful" && e.Target == "builds/lastSuccessfulBuild")
			f["absolute symlink"] = f["absolute symlink"] || strings.HasPrefix(e.Target, "/")
		}
		for _, name := range []string{"build.xml", "log", "log-index", "changelog.xml", "permalinks", "legacyIds", "nextBuildNumber", "name-utf8.txt", "program.dat"} {
			if base == name && strings.HasPrefix(rel, "jobs/") {
				f[name] = true
			}
		}
		if strings.Contains(rel, "/archive/") && e.Mode.IsRegular() {
			f["artifact"] = true
		}
		for _, excluded := range []string{"workspace/", "plugins/", "war/", "logs/", "caches/", "fingerprints/"} {
			if strings.HasPrefix(rel, excluded) && e.Mode.IsRegular() {
				f[excluded] = true
			}
		}
		if m := regexp.MustCompile(`^jobs/(.+/)?[^/]+/(workspace|workspace@tmp)/`).FindStringSubmatch(rel); m != nil {
			f["jobs/*/"+m[2]] = true
		}
		if strings.HasPrefix(rel, "plugins/") && strings.HasSuffix(rel, ".jpi") {
			f["plugins/*.jpi"] = true
		}
		if strings.HasSuffix(rel, "/META-INF/MANIFEST.MF") && strings.HasPrefix(rel, "plugins/") {
			f["exploded plugin"] = true
		}
	}
	want := []string{"component of 255 bytes", "path over 255 bytes", "zero-byte file", "empty dir", "unicode job", "emoji branch",
		"nested folders", "workflow/N.xml", "flowNodeStore.xml", "atomic temp file", "dangling symlink", "-1 symlink",
		"lastSuccessful link", "absolute symlink", "build.xml", "log", "log-index", "changelog.xml", "permalinks", "legacyIds",
		"nextBuildNumber", "name-utf8.txt", "program.dat", "artifact", "workspace/", "plugins/", "war/", "logs/", "caches/",
		"fingerprints/", "jobs/*/workspace", "jobs/*/workspace@tmp", "plugins/*.jpi", "exploded plugin", "nanosecond mtimes", "executable"}
	for _, w := range want {
		if !f[w] {
			t.Errorf("home lacks: %s", w)
		}
	}
}

func TestBuildBookkeeping(t *testing.T) {
	dir, _ := generate(t, "tiny", 2)
	nbns, _ := filepath.Glob(filepath.Join(dir, "jobs", "*", "nextBuildNumber"))
	if len(nbns) == 0 {
		t.Fatal("no top-level jobs")
	}
	for _, nbn := range nbns {
		job := filepath.Dir(nbn)
		next := readInt(t, nbn)
		builds, _ := filepath.Glob(filepath.Join(job, "builds", "[0-9]*"))
		for _, b := range builds {
			if n, _ := strconv.Atoi(filepath.Base(b)); n >= next {
				t.Errorf("%s: build %d >= nextBuildNumber %d", job, n, next)
			}
		}
		links, err := os.ReadFile(filepath.Join(job, "builds", "permalinks"))
		if err != nil || !strings.Contains(string(links), "lastCompletedBuild ") {
			t.Errorf("%s: permalinks %q, %v", job, links, err)
		}
		if fi, err := os.Stat(filepath.Join(job, "builds", "legacyIds")); err != nil || fi.Size() != 0 {
			t.Errorf("%s: legacyIds should exist and be empty", job)
		}
	}
}

func readInt(t *testing.T, file string) int {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return n
}

// Console logs should compress like real ones (zstd does 5–8×; flate a bit
// less), artifacts not at all.
func TestCompressibility(t *testing.T) {
	ratio := func(data []byte) float64 {
		var b bytes.Buffer
		w, _ := flate.NewWriter(&b, 6)
		w.Write(data)
		w.Close()
		return float64(len(data)) / float64(b.Len())
	}
	for _, pipeline := range []bool{false, true} {
		var b bytes.Buffer
		lt := newLogText(newRNG(1, "log"), "job", pipeline)
		if _, err := lt.write(&b, 4*mib, epoch, lt.header("job"), "Finished: SUCCESS\n"); err != nil {
			t.Fatal(err)
		}
		if r := ratio(b.Bytes()); r < 3.5 || r > 10 {
			t.Errorf("pipeline=%v log compresses %.1f×, want 3.5–10×", pipeline, r)
		}
	}
	buf := make([]byte, mib)
	newRNG(1, "art").fill(buf)
	if r := ratio(buf); r > 1.01 {
		t.Errorf("artifact bytes compress %.2f×", r)
	}
}

func TestMangle(t *testing.T) {
	cases := map[string]string{"main": "main", "PR-12": "PR-12"}
	for in, want := range cases {
		if got := mangle(in); got != want {
			t.Errorf("mangle(%q) = %q, want %q", in, got, want)
		}
	}
	a, b := mangle("feature/foo"), mangle("feature%2Ffoo")
	if a == b || !strings.HasPrefix(a, "feature-foo.") || strings.ContainsAny(a, "/%") {
		t.Errorf("mangle: %q, %q", a, b)
	}
	if m := mangle(strings.Repeat("x", 300)); len(m) > 40 {
		t.Errorf("long name not truncated: %q", m)
	}
}
