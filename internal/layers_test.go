// Package internal_test keeps the import layers of homesnap:
//
//	cmd → cli → (runner) → engine → repo → archive, scan, selector → jenkins
//	                                  ↘ store ← store/<backend>
//
// Backends know only the store package; the engine never reaches up to the
// CLI; the store layout (repo) never reaches up to the engine. Checked on
// every package's full (transitive) dependencies, as `go list` reports them.
package internal_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/homesnap/homesnap/"

// rule: a package matching from (and not except) must not depend on a
// package matching any of deny, unless that one also matches allow.
type rule struct {
	from   string
	except []string
	deny   []string
	allow  []string
	why    string
}

var rules = []rule{
	{from: "internal/store", deny: []string{"internal", "cmd"}, allow: []string{"internal/store"},
		why: "store backends know only the Store interface; cross-cutting concerns wrap it from above"},
	{from: "internal/engine", deny: []string{"internal/cli", "internal/runner", "cmd"},
		why: "the engine is called by the CLI and the sidecar runner, never the other way round"},
	{from: "internal/repo", deny: []string{"internal/engine", "internal/cli", "internal/runner", "cmd"},
		why: "the store layout is below the engine"},
	{from: "internal/archive", deny: []string{"internal/engine", "internal/cli", "internal/repo", "internal/store", "internal/scan"},
		why: "the on-store format knows no orchestration or storage"},
	{from: "internal/selector", deny: []string{"internal"}, allow: []string{"internal/selector", "internal/jenkins"},
		why: "selection knows only the Jenkins presets"},
	{from: "internal/jenkins", deny: []string{"internal"}, allow: []string{"internal/jenkins"},
		why: "Jenkins knowledge is a leaf: file formats and crypto, no storage or orchestration"},
	{from: "internal/homefs", deny: []string{"internal"}, allow: []string{"internal/homefs"},
		why: "the home file layer is a leaf: system calls on descriptors, nothing of homesnap"},
	{from: "internal", except: []string{"internal/cli", "internal/e2e"}, deny: []string{"internal/cli", "cmd"},
		why: "only the mains use the CLI package"},
}

// matches reports whether pkg (module-relative) is pattern or below it.
func matches(pkg, pattern string) bool {
	return pkg == pattern || strings.HasPrefix(pkg, pattern+"/")
}

func matchesAny(pkg string, patterns []string) bool {
	for _, p := range patterns {
		if matches(pkg, p) {
			return true
		}
	}
	return false
}

// violations checks deps (package → its dependencies, module-relative) and
// reports each forbidden dependency once, with the first rule it breaks.
func violations(deps map[string][]string) []string {
	var out []string
	for pkg, ds := range deps {
		for _, d := range ds {
			for _, r := range rules {
				if matches(pkg, r.from) && !matchesAny(pkg, r.except) && d != pkg && matchesAny(d, r.deny) && !matchesAny(d, r.allow) {
					out = append(out, pkg+" depends on "+d+": "+r.why)
					break
				}
			}
		}
	}
	return out
}

func TestImportLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, ok := strings.CutPrefix(f[0], module)
		if !ok {
			continue
		}
		for _, d := range f[1:] {
			if rel, ok := strings.CutPrefix(d, module); ok {
				deps[pkg] = append(deps[pkg], rel)
			}
		}
		if deps[pkg] == nil {
			deps[pkg] = []string{} // a package without module deps is still listed
		}
	}
	if len(deps) < 10 || deps["internal/engine"] == nil {
		t.Fatalf("go list found %d packages, not the module's: %s", len(deps), out)
	}
	for _, v := range violations(deps) {
		t.Error(v)
	}
}

// TestLayerRulesCatchViolations: the rules do fail on the imports they forbid.
func TestLayerRulesCatchViolations(t *testing.T) {
	bad := map[string][]string{
		"internal/store/s3":     {"internal/store", "internal/engine"},
		"internal/engine":       {"internal/repo", "internal/cli"},
		"internal/repo":         {"internal/store", "internal/engine"},
		"internal/store/file":   {"internal/store"},      // fine
		"internal/cli":          {"internal/engine"},     // fine
		"internal/sidecar":      {"internal/engine"},     // fine
		"internal/store/crypt2": {"internal/selector"},   // a backend reaching out
		"cmd/restore":           {"internal/cli"},        // fine
		"internal/e2e":          {"internal/testhome"},   // fine
		"internal/jenkins":      {"internal/cli/config"}, // only the mains use cli
	}
	got := violations(bad)
	if len(got) != 5 {
		t.Errorf("found %d violations, want 5:\n%s", len(got), strings.Join(got, "\n"))
	}
}
