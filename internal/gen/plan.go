package gen

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// All generated mtimes fall in [epoch, epoch+horizon); churn rounds start
// after it, so a churned file never goes back to an mtime it had before.
var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

const horizon = 365 * 24 * time.Hour

type agentKind int

const (
	agentInbound agentKind = iota
	agentSSH
	agentKubernetes
)

type agentPlan struct {
	name string
	kind agentKind
}

type folderPlan struct {
	rel         string // e.g. jobs/platform/jobs/backend
	name        string
	depth       int
	multibranch bool
	closed      bool // takes no children (the empty folder)
}

type jobPlan struct {
	rel       string
	name      string // the real item name (a branch name for branches)
	pipeline  bool
	branch    bool
	builds    int
	legacy    bool    // pre-2.x permalink symlinks in the job and builds dirs
	workspace bool    // workspace/ and workspace@tmp/ inside the job dir
	atomicTmp bool    // an in-flight config.xml-atomic<digits>tmp
	longPath  bool    // newest build archives very long paths
	running   bool    // newest build is still in progress
	huge      []int64 // sizes of huge logs for the newest builds
}

type plan struct {
	p       Preset
	seed    int64
	folders []folderPlan
	jobs    []jobPlan
	agents  []agentPlan
	used    map[string]bool
}

var (
	folderNames  = []string{"platform", "team-alpha", "team-bravo", "payments", "mobile", "data", "infra", "sandbox", "releases", "legacy", "qa", "security", "frontend", "backend"}
	serviceNames = []string{"api-gateway", "billing", "checkout", "frontend", "inventory", "auth-service", "payments", "search", "notifications", "reporting", "user-profile", "catalog", "shipping", "analytics", "mobile-app", "docs-site", "infra-terraform", "helm-charts", "base-images", "data-pipeline", "ml-training", "etl", "perf-tests", "e2e-tests", "security-scan", "release-train", "sdk-java", "sdk-python", "cli", "website"}
	jobSuffixes  = []string{"", "-build", "-deploy", "-nightly", "-release", "-ci", "-smoke", "-promote"}
	branchNames  = []string{"develop", "release/2.3", "release/2.4", "feature/login-form", "feature/JIRA-4521-split-ledger-writes", "bugfix/npe-on-startup", "hotfix/1.9.1", "dependabot/npm_and_yarn/lodash-4.17.21", "renovate/golang-1.x", "experiment/async-io"}
)

func makePlan(p Preset, seed int64) *plan {
	r := newRNG(seed, "plan")
	pl := &plan{p: p, seed: seed, used: map[string]bool{}}
	pl.addSpecials(r)
	for range p.Folders {
		parent := pl.randomParent(r, p.MaxDepth)
		pl.addFolder(r, parent, r.pick(folderNames), false)
	}
	for i := range p.Freestyle {
		pl.addJob(r, pl.randomParent(r, p.MaxDepth+1), pl.jobName(r), jobPlan{legacy: i == 0 || r.chance(0.3), workspace: i == 0 || r.chance(0.1)})
	}
	for i := range p.Pipelines {
		pl.addJob(r, pl.randomParent(r, p.MaxDepth+1), pl.jobName(r), jobPlan{pipeline: true, atomicTmp: i == 0, running: i == 0 || r.chance(0.05), workspace: r.chance(0.05)})
	}
	for i := range p.Multibranch {
		branches := []string{"main"}
		if i == 0 {
			// Mangled names: a slash, an emoji, a long name and a PR.
			branches = append(branches, "feature/🚀-launch", "feature/JIRA-1234-new-billing-flow-with-retries", "PR-"+strconv.Itoa(r.between(10, 999)))
		}
		for len(branches) < r.between(max(1, p.Branches/2), p.Branches*3/2) {
			b := r.pick(branchNames)
			if r.chance(0.3) {
				b = "PR-" + strconv.Itoa(r.between(10, 9999))
			}
			branches = append(branches, b)
		}
		pl.addMultibranch(r, pl.randomParent(r, p.MaxDepth+1), r.pick(serviceNames), branches)
	}
	pl.assignHugeLogs(r)
	pl.addAgents(r)
	return pl
}

// addSpecials adds the items every home has regardless of preset: they are
// the edge cases a backup tool gets wrong.
func (pl *plan) addSpecials(r *rng) {
	// A folder chain whose paths pass 255 bytes before the builds dir.
	a := pl.addFolder(r, "", "platform-engineering-shared-services-and-developer-tooling", false)
	b := pl.addFolder(r, a, "integration-test-suites-for-the-legacy-billing-and-invoicing-platform", false)
	pl.addJob(r, b, "nightly-end-to-end-regression-against-the-staging-environment", jobPlan{longPath: true, workspace: true, legacy: true})
	pl.addJob(r, "", "déploiement-生产", jobPlan{pipeline: true})
	pl.addJob(r, "", "Release Notes (legacy)", jobPlan{legacy: true})
	pl.folders = append(pl.folders, folderPlan{rel: "jobs/empty-folder", name: "empty-folder", depth: 1, closed: true})
	pl.used["jobs/empty-folder"] = true
}

// childRel is where an item named name lives under parent ("" = root).
func childRel(parent, name string) string {
	if parent == "" {
		return "jobs/" + name
	}
	return parent + "/jobs/" + name
}

// unique returns rel, or rel with a numeric suffix if it is taken.
func (pl *plan) unique(rel string) string {
	out := rel
	for i := 2; pl.used[out]; i++ {
		out = rel + "-" + strconv.Itoa(i)
	}
	pl.used[out] = true
	return out
}

// randomParent picks the root or a folder shallower than maxDepth.
func (pl *plan) randomParent(r *rng, maxDepth int) string {
	var cands []string
	for _, f := range pl.folders {
		if !f.multibranch && !f.closed && f.depth < maxDepth {
			cands = append(cands, f.rel)
		}
	}
	if len(cands) == 0 || r.chance(0.35) {
		return ""
	}
	return r.pick(cands)
}

func (pl *plan) depth(parent string) int { return strings.Count(parent, "/jobs/") + 1 }

func (pl *plan) addFolder(r *rng, parent, name string, mb bool) string {
	rel := pl.unique(childRel(parent, name))
	d := 1
	if parent != "" {
		d = pl.depth(parent) + 1
	}
	pl.folders = append(pl.folders, folderPlan{rel: rel, name: rel[strings.LastIndexByte(rel, '/')+1:], depth: d, multibranch: mb})
	return rel
}

func (pl *plan) jobName(r *rng) string { return r.pick(serviceNames) + r.pick(jobSuffixes) }

func (pl *plan) buildCount(r *rng) int {
	return max(1, r.between(pl.p.Builds/2, pl.p.Builds*3/2))
}

func (pl *plan) addJob(r *rng, parent, name string, j jobPlan) {
	j.rel = pl.unique(childRel(parent, name))
	j.name = j.rel[strings.LastIndexByte(j.rel, '/')+1:]
	j.builds = pl.buildCount(r)
	pl.jobs = append(pl.jobs, j)
}

func (pl *plan) addMultibranch(r *rng, parent, name string, branches []string) {
	mb := pl.addFolder(r, parent, name, true)
	for _, b := range branches {
		rel := pl.unique(mb + "/branches/" + mangle(b))
		pl.jobs = append(pl.jobs, jobPlan{rel: rel, name: b, pipeline: true, branch: true, builds: pl.buildCount(r)})
	}
}

// mangle approximates branch-api's NameMangler: short safe names are kept,
// anything else is sanitised, truncated and suffixed with a hash so that
// distinct branches never collide on disk.
func mangle(name string) string {
	safe := len(name) <= 32
	for _, c := range name {
		if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			safe = false
		}
	}
	if safe {
		return name
	}
	var b strings.Builder
	for _, c := range name {
		if c < utf8.RuneSelf && !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			c = '-'
		}
		if b.Len()+utf8.RuneLen(c) > 24 {
			break
		}
		b.WriteRune(c)
	}
	h := hashString(name)
	suffix := make([]byte, 5)
	for i := range suffix {
		suffix[i] = alnum[h%uint64(len(alnum))]
		h /= uint64(len(alnum))
	}
	return b.String() + "." + string(suffix)
}

// assignHugeLogs gives the preset's huge logs to random non-branch jobs.
func (pl *plan) assignHugeLogs(r *rng) {
	for range pl.p.HugeLogs {
		j := &pl.jobs[r.IntN(len(pl.jobs))]
		j.huge = append(j.huge, pl.p.HugeMin+r.Int64N(pl.p.HugeMax-pl.p.HugeMin+1))
		j.builds = max(j.builds, len(j.huge))
	}
}

func (pl *plan) addAgents(r *rng) {
	for i := range max(3, pl.p.Agents) {
		switch i % 3 {
		case 0:
			pl.agents = append(pl.agents, agentPlan{fmt.Sprintf("linux-agent-%02d", i/3+1), agentInbound})
		case 1:
			pl.agents = append(pl.agents, agentPlan{fmt.Sprintf("build-vm-%02d", i/3+1), agentSSH})
		default:
			pl.agents = append(pl.agents, agentPlan{r.pick([]string{"maven", "node", "docker", "golang"}) + "-" + r.alnum(5), agentKubernetes})
		}
	}
}
