package cli

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The release's deb and rpm packages and its archives carry every
// generated file (a new man page or completion script included) from the
// committed copies, install the binary as /usr/bin/homesnap, and install
// nothing under the names restore, snapshot or prune (Debian's dump owns
// /sbin/restore).
func TestPackagesShipTheGeneratedFiles(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type content struct{ Src, Dst, Packager string }
	var config struct {
		Archives []struct{ Files []string }
		Nfpms    []struct {
			Formats  []string
			Bindir   string
			Contents []content
		}
	}
	if err := yaml.Unmarshal(data, &config); err != nil {
		t.Fatal(err)
	}
	if len(config.Nfpms) != 1 || len(config.Archives) != 1 {
		t.Fatalf(".goreleaser.yaml: %d nfpms and %d archives, want one of each", len(config.Nfpms), len(config.Archives))
	}
	nfpm := config.Nfpms[0]
	if !slices.Equal(nfpm.Formats, []string{"deb", "rpm"}) || nfpm.Bindir != "/usr/bin" {
		t.Errorf("nfpms: formats %v, bindir %q; want deb and rpm, /usr/bin", nfpm.Formats, nfpm.Bindir)
	}
	matches := func(pattern, name string) bool {
		ok, err := path.Match(pattern, name)
		if err != nil {
			t.Fatalf(".goreleaser.yaml: %q: %v", pattern, err)
		}
		return ok
	}
	files, err := Generated()
	if err != nil {
		t.Fatal(err)
	}
	for name := range files {
		for _, format := range nfpm.Formats {
			if !slices.ContainsFunc(nfpm.Contents, func(c content) bool {
				return (c.Packager == "" || c.Packager == format) && matches(c.Src, name) && strings.HasPrefix(c.Dst, "/usr/share/")
			}) {
				t.Errorf("the %s package does not install %s", format, name)
			}
		}
		if !slices.ContainsFunc(config.Archives[0].Files, func(p string) bool { return matches(p, name) }) {
			t.Errorf("the archives do not hold %s", name)
		}
	}
	for _, c := range nfpm.Contents {
		if base := path.Base(c.Dst); slices.Contains([]string{"restore", "snapshot", "prune"}, base) {
			t.Errorf("the packages install %s: a command named %s on the host's PATH (Debian's dump owns /sbin/restore)", c.Dst, base)
		}
	}
}
