package jenkins_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/jenkins"
)

// TestDevicesAndHugeFilesAreProblems: even through an fs.FS that follows
// symlinks (os.DirFS), a node config, a key file, master.key or the
// identity that is a device or larger than its bound is a problem naming
// the file, read no further; Inspect itself succeeds.
func TestDevicesAndHugeFilesAreProblems(t *testing.T) {
	home := genHome(t)
	replace := func(rel string, size int64) {
		p := filepath.Join(home, filepath.FromSlash(rel))
		os.Remove(p)
		if size < 0 {
			if err := os.Symlink("/dev/zero", p); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil { // sparse: no disk used
			t.Fatal(err)
		}
	}
	replace("nodes/ws-agent/config.xml", -1)
	replace(jenkins.IdentityPath, -1)
	replace(jenkins.SecretKeyPath, jenkins.MaxKeyFile+1)
	os.MkdirAll(filepath.Join(home, "nodes", "huge"), 0o755)
	replace("nodes/huge/config.xml", 10<<30)
	s := inspect(t, home)
	for _, p := range []string{"nodes/ws-agent/config.xml", "nodes/huge/config.xml", jenkins.IdentityPath} {
		if !names(s.Problems, p) {
			t.Errorf("no problem names %s: %v", p, s.Problems)
		}
	}
	var keyErr string
	for _, k := range s.Keys {
		if k.Path == jenkins.SecretKeyPath {
			keyErr = k.Error
		}
	}
	if !strings.Contains(keyErr, "more than the") {
		t.Errorf("%s: %q", jenkins.SecretKeyPath, keyErr)
	}

	replace(jenkins.MasterKeyPath, -1)
	if s := inspect(t, home); s.MasterKey != "missing" || !names(s.Problems, jenkins.MasterKeyPath) {
		t.Errorf("master.key -> /dev/zero: %q, %v", s.MasterKey, s.Problems)
	}
}
