package testhome

import (
	"archive/zip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Fixtures is the directory of the Jenkins fixtures in testdata.
func Fixtures() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "jenkins")
}

// Build creates a home in dir from real Jenkins fixture homes plus every
// edge case a restore must reproduce: long and unicode names, empty
// directories and files, relative and dangling symlinks, secret modes,
// nanosecond mtimes, and paths that must not be selected.
func Build(dir string) error {
	for _, z := range []string{
		"hudson__model__QueueTest__recover_from_legacy_list.zip", // a full 2015 home
		"hudson__model__ParametersAction2Test__backwardCompatibility.zip",
		"corruptedFlowGraph.zip", // ~480 workflow/*.xml files
	} {
		if err := unzip(filepath.Join(Fixtures(), "zips", z), dir); err != nil {
			return err
		}
	}
	long := strings.Repeat("very-long-folder-name-", 11) // 242 bytes
	files := map[string]string{
		"nodes/agent-1/config.xml":                             "<slave><name>agent-1</name></slave>\n",
		"nodes/k8s-pod-x1/config.xml":                          "<slave><name>k8s-pod-x1</name></slave>\n",
		"secrets/jenkins.slaves.JnlpSlaveAgentProtocol.secret": strings.Repeat("\x07", 48),
		"jobs/déploiement-生产/config.xml":                       "<project/>\n",
		"jobs/déploiement-生产/builds/1/log":                     strings.Repeat("Started by user admin\n", 500),
		"jobs/déploiement-生产/builds/1/zero":                    "",
		"jobs/" + long + "/jobs/" + long + "/config.xml":       "<project>long</project>\n",
		"jobs/test/builds/1/archive/blob.bin":                  pseudoRandom(3 << 20),
		"jobs/test/builds/2/log":                               consoleLog(200000), // spans frames
		"jobs/test/workspace/src/main.c":                       "int main(){}\n",   // excluded
		"jobs/test/workspace@tmp/lock":                         "",                 // excluded
		"jobs/test/config.xml-atomic123456tmp":                 "<half",            // excluded
		"plugins/git.jpi":                                      "PK",               // not selected
	}
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	for _, d := range []string{"jobs/empty-folder/jobs", "nodes/agent-1/empty"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	links := map[string]string{
		"jobs/test/lastSuccessful":             "builds/lastSuccessfulBuild",
		"jobs/test/builds/lastSuccessfulBuild": "2",
		"jobs/test/builds/lastFailedBuild":     "-1", // dangling, as Jenkins leaves it
		"jobs/test/builds/abs-link":            "/var/jenkins_home/jobs",
	}
	for rel, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, rel)); err != nil {
			return err
		}
	}
	modes := map[string]os.FileMode{
		"secrets":          0o700,
		"identity.key.enc": 0o600,
		"secrets/jenkins.slaves.JnlpSlaveAgentProtocol.secret": 0o600,
		"jobs/test/builds/2/log":                               0o640,
		"nodes/agent-1/empty":                                  0o750 | os.ModeSetgid,
	}
	for rel, m := range modes {
		if err := os.Chmod(filepath.Join(dir, rel), m); err != nil {
			return err
		}
	}
	if os.Geteuid() == 0 { // numeric owners are restored when running as root
		owners := map[string][2]int{
			"jobs":                             {1000, 1000},
			"jobs/test/config.xml":             {1000, 1000},
			"secrets":                          {4242, 4243},
			"jobs/test/builds/lastFailedBuild": {1000, 1001},
		}
		for rel, o := range owners {
			if err := os.Lchown(filepath.Join(dir, rel), o[0], o[1]); err != nil {
				return err
			}
		}
	}
	return Touch(dir)
}

// Touch gives every path a distinct mtime with a nanosecond part, deepest
// first so that directory mtimes stick.
func Touch(dir string) error {
	var paths []string
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		paths = append(paths, p)
		return err
	}); err != nil {
		return err
	}
	base := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := len(paths) - 1; i > 0; i-- {
		t := base.Add(time.Duration(i)*time.Minute + time.Duration(i*7919)%time.Second)
		if err := Lchtimes(paths[i], t); err != nil {
			return fmt.Errorf("touch %s: %w", paths[i], err)
		}
	}
	return nil
}

func unzip(zipPath, dir string) error {
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		return err
	}
	defer zr.Close()
	for _, f := range zr.File {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(os.PathSeparator)) {
			return fmt.Errorf("%s: entry %q escapes", zipPath, f.Name)
		}
		if f.FileInfo().IsDir() {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		rc, err := f.Open()
		if err != nil {
			return err
		}
		w, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, f.Mode().Perm()|0o200)
		if err == nil {
			_, err = io.Copy(w, rc)
			w.Close()
		}
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// consoleLog returns n lines of a plausible build log (about 45 bytes each).
func consoleLog(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "[%08d] [INFO] Compiling module %d of %d\n", i, i%977, n)
	}
	return b.String()
}

// pseudoRandom returns n incompressible, reproducible bytes.
func pseudoRandom(n int) string {
	b := make([]byte, n)
	x := uint64(0x9E3779B97F4A7C15)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return string(b)
}
