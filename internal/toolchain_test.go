package internal_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestToolchainFollowsGoMod: go.mod's go line is the Go release homesnap is
// built with (older ones have reachable standard-library vulnerabilities),
// and every script that runs go selects it, as the Dockerfile's base image
// does: a machine starts on its own Go, with GOTOOLCHAIN=local.
func TestToolchainFollowsGoMod(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(read("go.mod"))
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	want := m[1]
	if !strings.Contains(read("Dockerfile"), "ARG GO_VERSION="+want+"\n") {
		t.Errorf("Dockerfile: ARG GO_VERSION is not %s (go.mod's go line)", want)
	}
	scripts, _ := filepath.Glob("../scripts/*.sh")
	more, _ := filepath.Glob("../scripts/bench/*.sh")
	runsGo := regexp.MustCompile(`(?m)^[^#\n]*\bgo (build|test|run|install|vet|list|mod|env|version)\b`)
	for _, p := range append(append(scripts, more...), "../.ci/run") {
		s := read(strings.TrimPrefix(p, "../"))
		if p != "../.ci/run" && !runsGo.MatchString(s) {
			continue
		}
		if !strings.Contains(s, "\nexport GOTOOLCHAIN=go"+want+" ") {
			t.Errorf("%s runs go but does not export GOTOOLCHAIN=go%s (go.mod's go line)", strings.TrimPrefix(p, "../"), want)
		}
	}
}
