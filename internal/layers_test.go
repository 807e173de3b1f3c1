// Package internal_test keeps the import layers of homesnap:
//
//	cmd                 → cli
//	cli                 → runner, metrics, maint, snapshot, restore, check, agents, crypt, auth, lease
//	                      (cli opens the home once: a homefs.Home every package below takes)
//	runner, metrics     → snapshot (its Result)
//	maint               → snapshot (a consolidation is a snapshot), prune → retention
//	snapshot, restore, check, agents: the jobs, none importing another
//	                      but agents → check (a snapshot read as a file system)
//	                    → fetch (plan reader, ranged fetch, checked copy of a file)
//	                    → homemark (the home's check and mark; snapshot, restore)
//	snapshot            → journal (the change journal: inotify) → scan
//	                    → scan → homefs (the home, by descriptor only)
//	fetch, prune, crypt, auth, lease → repo → archive (the format: no Jenkins, no selector)
//	repo                → store ← store/<backend> → store/backend (helpers only backends use)
//	snapshot, restore, check, fetch, homemark → selector → jenkins
//	testenv             a leaf for tests and their helpers (storetest) only
//
// Backends know only the store package; no job reaches up to the CLI or
// the runner, nor into another job; the shared pieces and the store layout
// (repo) know none of the jobs above them. Checked on every package's full
// (transitive) dependencies, as `go list` reports them.
package internal_test

import (
	"os/exec"
	"slices"
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

var (
	jobs  = []string{"internal/snapshot", "internal/restore", "internal/check", "internal/maint", "internal/agents"}
	above = []string{"internal/cli", "internal/runner", "cmd"}
)

var rules = []rule{
	{from: "internal/store", deny: []string{"internal", "cmd"}, allow: []string{"internal/store", "internal/testenv"},
		why: "store backends know only the Store interface; cross-cutting concerns wrap it from above (storetest follows testenv's rule)"},
	{from: "internal/snapshot", deny: append(slices.Clone(jobs[1:]), above...),
		why: "a snapshot knows nothing of restoring, checking or maintaining, nor of its callers"},
	{from: "internal/restore", deny: append([]string{"internal/snapshot", "internal/check", "internal/maint", "internal/agents"}, above...),
		why: "a restore reads what snapshots wrote through fetch and homemark, never through snapshot's code"},
	{from: "internal/check", deny: append([]string{"internal/snapshot", "internal/restore", "internal/maint", "internal/agents"}, above...),
		why: "a check reads snapshots as a restore does (fetch), without restoring"},
	{from: "internal/agents", deny: append([]string{"internal/snapshot", "internal/restore", "internal/maint"}, above...),
		why: "the agent check reads the home and snapshots (through check); the CLI wires it into a restore or a snapshot"},
	{from: "internal/maint", deny: append([]string{"internal/restore", "internal/check"}, above...),
		why: "maintenance rewrites through snapshot; it never restores or checks, and is called by the CLI"},
	{from: "internal/fetch", deny: append(slices.Clone(jobs), above...),
		why: "the shared plan reader and ranged fetch know none of the jobs that use them"},
	{from: "internal/homemark", deny: append(slices.Clone(jobs), append(above, "internal/fetch", "internal/repo", "internal/store")...),
		why: "the home's check and mark know the home, not the store or the jobs"},
	{from: "internal/repo", deny: []string{"internal", "cmd"}, allow: []string{"internal/repo", "internal/archive", "internal/store"},
		why: "the store layout knows only the format and the Store interface"},
	{from: "internal/archive", deny: []string{"internal", "cmd"}, allow: []string{"internal/archive"},
		why: "the on-store format knows no orchestration, storage, selection or Jenkins: it carries a selection, selector says what it means"},
	{from: "internal/prune", deny: []string{"internal", "cmd"}, allow: []string{"internal/prune", "internal/repo", "internal/retention", "internal/archive", "internal/store"},
		why: "a prune plan is computed from records and listings, below maintenance"},
	{from: "internal/retention", deny: []string{"internal", "cmd"}, allow: []string{"internal/retention"},
		why: "retention is a pure function of the history's times"},
	{from: "internal/crypt", deny: append(append(slices.Clone(jobs), "internal/fetch", "internal/homemark"), above...),
		why: "encryption wraps the Store; it knows the layout, not the jobs"},
	{from: "internal/auth", deny: append(append(slices.Clone(jobs), "internal/fetch", "internal/homemark", "internal/crypt"), above...),
		why: "authentication wraps the Store; it knows the layout, not the jobs"},
	{from: "internal/lease", deny: append(append(slices.Clone(jobs), "internal/fetch", "internal/homemark"), above...),
		why: "the one-writer lease is a store object; it knows no job"},
	{from: "internal/metrics", deny: append([]string{"internal/restore", "internal/check", "internal/maint"}, above...),
		why: "metrics observe the sidecar's snapshots; the CLI wires them"},
	{from: "internal/snaptest", deny: []string{"internal/restore", "internal/check", "internal/maint"},
		why: "the jobs' tests share snaptest, so it imports none of them but snapshot"},
	{from: "internal/selector", deny: []string{"internal"}, allow: []string{"internal/selector", "internal/jenkins"},
		why: "selection knows only the Jenkins presets"},
	{from: "internal/jenkins", deny: []string{"internal"}, allow: []string{"internal/jenkins"},
		why: "Jenkins knowledge is a leaf: file formats and crypto, no storage or orchestration"},
	{from: "internal/homefs", deny: []string{"internal"}, allow: []string{"internal/homefs"},
		why: "the home file layer is a leaf: system calls on descriptors, nothing of homesnap"},
	{from: "internal", except: []string{"internal/cli", "internal/e2e"}, deny: []string{"internal/cli", "cmd"},
		why: "only the mains use the CLI package"},
	{from: "internal/testenv", deny: []string{"internal"}, allow: []string{"internal/testenv"},
		why: "the tests' rule for what they need is a leaf"},
	{from: "internal", except: []string{"internal/testenv", "internal/store/storetest"}, deny: []string{"internal/testenv"},
		why: "testenv is for tests: only they and storetest, a test helper, import it"},
	{from: "cmd", deny: []string{"internal/testenv"},
		why: "testenv is for tests"},
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
	if len(deps) < 10 || deps["internal/snapshot"] == nil {
		t.Fatalf("go list found %d packages, not the module's: %s", len(deps), out)
	}
	for _, v := range violations(deps) {
		t.Error(v)
	}
}

// TestLayerRulesCatchViolations: the rules do fail on the imports they forbid.
func TestLayerRulesCatchViolations(t *testing.T) {
	bad := map[string][]string{
		"internal/store/s3":        {"internal/store", "internal/snapshot"},
		"internal/snapshot":        {"internal/repo", "internal/cli"},
		"internal/repo":            {"internal/store", "internal/restore"},
		"internal/restore":         {"internal/fetch", "internal/snapshot"}, // a job reaching into another
		"internal/fetch":           {"internal/repo", "internal/check"},     // a shared piece reaching up
		"internal/store/file":      {"internal/store"},                      // fine
		"internal/cli":             {"internal/maint", "internal/restore"},  // fine
		"internal/maint":           {"internal/snapshot", "internal/prune"}, // fine
		"internal/store/crypt2":    {"internal/selector"},                   // a backend reaching out
		"cmd/restore":              {"internal/cli"},                        // fine
		"internal/e2e":             {"internal/testhome"},                   // fine
		"internal/jenkins":         {"internal/cli/config"},                 // only the mains use cli
		"internal/archive":         {"internal/selector"},                   // the format knowing Jenkins' presets
		"internal/restore/x":       {"internal/testenv"},                    // production code skipping like a test
		"internal/store/storetest": {"internal/testenv"},                    // fine
	}
	got := violations(bad)
	if len(got) != 9 {
		t.Errorf("found %d violations, want 9:\n%s", len(got), strings.Join(got, "\n"))
	}
}
