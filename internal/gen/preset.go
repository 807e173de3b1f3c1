package gen

import (
	"fmt"
	"slices"
	"strings"
)

// Preset sizes a generated home. The structural edge cases (secrets, agents,
// unicode and very long names, legacy symlinks, workspaces, temp files) are
// always present; the counts below only scale the bulk around them.
type Preset struct {
	Name string

	Folders     int // plain folders, nested up to MaxDepth levels
	MaxDepth    int
	Freestyle   int // freestyle jobs
	Pipelines   int // standalone Pipeline jobs
	Multibranch int // multibranch projects
	Branches    int // mean branches per multibranch project
	Builds      int // mean builds kept per job or branch

	LogMedian int64   // median console log size in bytes
	LogSigma  float64 // log-normal spread of log sizes
	LogMax    int64   // cap for ordinary logs
	HugeLogs  int     // extra huge logs, uniform in [HugeMin, HugeMax]
	HugeMin   int64
	HugeMax   int64

	ArtifactRate   float64 // fraction of builds that archive artifacts
	ArtifactMedian int64   // median artifact size (random bytes)
	FlowNodes      int     // mean flow-node files per Pipeline build
	JUnitMax       int     // most test cases in a junitResult.xml (at least 20); 0 means 400

	Agents         int // permanent, SSH and Kubernetes agents in nodes/
	Plugins        int // .jpi files, each with an exploded directory
	PluginMedian   int64
	Fingerprints   int
	WorkspaceFiles int // files in workspaces (never selected)
}

const (
	kib = 1 << 10
	mib = 1 << 20
)

var presets = map[string]Preset{
	// tiny: ~200 files, well under 1 MB, for unit tests.
	"tiny": {
		Name: "tiny", Folders: 1, MaxDepth: 2, Freestyle: 1, Pipelines: 1,
		Multibranch: 1, Branches: 1, Builds: 2,
		LogMedian: 2 * kib, LogSigma: 1.0, LogMax: 32 * kib,
		ArtifactRate: 0.3, ArtifactMedian: 4 * kib, FlowNodes: 4,
		Agents: 3, Plugins: 2, PluginMedian: 8 * kib, Fingerprints: 6, WorkspaceFiles: 8,
	},
	// small: ~2k files, 20–40 MB.
	"small": {
		Name: "small", Folders: 4, MaxDepth: 3, Freestyle: 6, Pipelines: 8,
		Multibranch: 2, Branches: 4, Builds: 8,
		LogMedian: 20 * kib, LogSigma: 1.3, LogMax: 2 * mib,
		HugeLogs: 2, HugeMin: 2 * mib, HugeMax: 4 * mib,
		ArtifactRate: 0.25, ArtifactMedian: 50 * kib, FlowNodes: 14,
		Agents: 6, Plugins: 20, PluginMedian: 100 * kib, Fingerprints: 100, WorkspaceFiles: 60,
	},
	// medium: ~100k files, 1–2 GB, with a couple of 50–200 MB logs.
	"medium": {
		Name: "medium", Folders: 30, MaxDepth: 4, Freestyle: 120, Pipelines: 180,
		Multibranch: 25, Branches: 8, Builds: 18,
		LogMedian: 25 * kib, LogSigma: 1.4, LogMax: 40 * mib,
		HugeLogs: 2, HugeMin: 50 * mib, HugeMax: 200 * mib,
		ArtifactRate: 0.2, ArtifactMedian: 80 * kib, FlowNodes: 16,
		Agents: 40, Plugins: 150, PluginMedian: 150 * kib, Fingerprints: 8000, WorkspaceFiles: 3000,
	},
	// million: ~1M small files (about 300 freestyle jobs keeping ~950
	// builds each: log, build.xml, changelog.xml, often junitResult.xml),
	// the shape of a large controller; for the scale benchmark.
	"million": {
		Name: "million", Folders: 10, MaxDepth: 2, Freestyle: 300,
		Builds:    950,
		LogMedian: 2 * kib, LogSigma: 0.8, LogMax: 256 * kib,
		ArtifactRate: 0, FlowNodes: 4,
		Agents: 40, Plugins: 20, PluginMedian: 100 * kib, Fingerprints: 2000, WorkspaceFiles: 100,
	},
	// five-million: the million's shape, wider (~1,490 jobs of ~950
	// builds: ~5.0M files, ~1.5M directories, ~9 GiB), with smaller logs
	// and test reports; for the scale benchmark (scale.sh says how to fit
	// it and its restore on one disk).
	"five-million": {
		Name: "five-million", Folders: 30, MaxDepth: 2, Freestyle: 1490,
		Builds:    950,
		LogMedian: 1 * kib, LogSigma: 0.8, LogMax: 64 * kib,
		ArtifactRate: 0, FlowNodes: 4, JUnitMax: 40,
		Agents: 40, Plugins: 20, PluginMedian: 100 * kib, Fingerprints: 2000, WorkspaceFiles: 100,
	},
}

// PresetNames lists the built-in presets.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// LookupPreset returns the built-in preset called name.
func LookupPreset(name string) (Preset, error) {
	p, ok := presets[name]
	if !ok {
		return Preset{}, fmt.Errorf("unknown preset %q (known: %s)", name, strings.Join(PresetNames(), ", "))
	}
	return p, nil
}

func (p Preset) validate() error {
	if p.HugeLogs > 0 && !(p.HugeMin > 0 && p.HugeMin <= p.HugeMax) {
		return fmt.Errorf("preset %q: HugeLogs needs 0 < HugeMin <= HugeMax (have %d, %d)", p.Name, p.HugeMin, p.HugeMax)
	}
	if p.LogMax <= 0 {
		return fmt.Errorf("preset %q: LogMax must be positive", p.Name)
	}
	return nil
}
