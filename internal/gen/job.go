package gen

import (
	"strconv"
	"strings"
	"time"
)

// permalinkNames are the keys of builds/permalinks, in the order written.
var permalinkNames = []string{"lastCompletedBuild", "lastFailedBuild", "lastStableBuild", "lastSuccessfulBuild", "lastUnstableBuild", "lastUnsuccessfulBuild"}

// permalinkMatches reports whether a build with result counts for name.
func permalinkMatches(name, result string) bool {
	switch name {
	case "lastCompletedBuild":
		return result != ""
	case "lastFailedBuild":
		return result == "FAILURE"
	case "lastStableBuild":
		return result == "SUCCESS"
	case "lastSuccessfulBuild":
		return result == "SUCCESS" || result == "UNSTABLE"
	case "lastUnstableBuild":
		return result == "UNSTABLE"
	case "lastUnsuccessfulBuild":
		return result != "" && result != "SUCCESS"
	}
	return false
}

func formatPermalinks(m map[string]int) string {
	var b strings.Builder
	for _, n := range permalinkNames {
		v, ok := m[n]
		if !ok {
			v = -1
		}
		b.WriteString(n + " " + strconv.Itoa(v) + "\n")
	}
	return b.String()
}

// writeJob writes one job (or multibranch branch) with its kept builds.
func (g *generator) writeJob(w *writer, j jobPlan) error {
	r := newRNG(g.seed, "job:"+j.rel)
	// Logs draw from their own stream so that log sizes (how many lines are
	// drawn) do not shift the job's other choices.
	lt := newLogText(newRNG(g.seed, "log:"+j.rel), j.name, j.pipeline)
	discarded := r.between(0, 3*j.builds)
	slots := time.Duration(j.builds + discarded + 1)
	interval := time.Duration(r.Int64N(int64(min(72*time.Hour, (horizon-60*24*time.Hour)/slots)))) + 10*time.Minute
	lastStart := epoch.Add(horizon - 8*time.Hour - time.Duration(r.Int64N(int64(10*24*time.Hour))))
	created := lastStart.Add(-interval * slots)

	specs := g.buildSpecs(r, j, discarded+1, lastStart, interval)
	last := specs[len(specs)-1]
	links := map[string]int{}
	for _, s := range specs {
		for _, name := range permalinkNames {
			if permalinkMatches(name, s.result) {
				links[name] = s.number
			}
		}
		if err := writeBuild(w, j.rel, s, r, lt); err != nil {
			return err
		}
	}
	lastEnd := last.start.Add(last.duration)
	if err := g.writeJobFiles(w, j, r, created, lastEnd, last.number+1, links); err != nil {
		return err
	}
	if j.legacy {
		if err := writeLegacyLinks(w, j.rel, links, ns(r, lastEnd)); err != nil {
			return err
		}
	}
	if j.workspace {
		return writeJobWorkspace(w, j.rel, lastEnd, r)
	}
	return nil
}

// buildSpecs lays out the kept builds: numbers from first with occasional
// gaps (deleted builds), start times spaced by interval up to lastStart.
func (g *generator) buildSpecs(r *rng, j jobPlan, first int, lastStart time.Time, interval time.Duration) []buildSpec {
	nums := make([]int, 0, j.builds)
	for n := first; len(nums) < j.builds; n++ {
		nums = append(nums, n)
		if r.chance(0.05) {
			n += r.between(1, 3)
		}
	}
	lastN := nums[len(nums)-1]
	specs := make([]buildSpec, 0, len(nums))
	for _, n := range nums {
		start := lastStart.Add(-interval*time.Duration(lastN-n) + time.Duration(r.Int64N(int64(interval/4)+1)))
		specs = append(specs, newBuildSpec(r, g.p.sizing(), n, j.pipeline, start))
	}
	newest := &specs[len(specs)-1]
	newest.longPath = j.longPath
	if j.running {
		newest.result = ""
		newest.completedStore = false
	}
	for k, size := range j.huge {
		specs[len(specs)-1-k].logSize = size
	}
	return specs
}

func (g *generator) writeJobFiles(w *writer, j jobPlan, r *rng, created, lastEnd time.Time, next int, links map[string]int) error {
	var cfg string
	switch {
	case j.branch:
		cfg = branchXML(j.name, r)
	case j.pipeline:
		cfg = pipelineXML(j.name, r)
	default:
		cfg = freestyleXML(j.name, r)
	}
	cfgTime := ns(r, created.Add(time.Duration(r.Int64N(int64(lastEnd.Sub(created))/2+1))))
	files := []textFile{
		{"config.xml", cfg, cfgTime},
		{"nextBuildNumber", strconv.Itoa(next) + "\n", ns(r, lastEnd.Add(-time.Minute))},
		{"builds/legacyIds", "", ns(r, created)},
		{"builds/permalinks", formatPermalinks(links), ns(r, lastEnd.Add(time.Second))},
	}
	if j.branch {
		files = append(files, textFile{"name-utf8.txt", j.name, ns(r, created)})
	}
	if !j.pipeline && r.chance(0.5) {
		files = append(files, textFile{"scm-polling.log", "Started on " + lastEnd.Format(time.RFC1123) + "\nUsing strategy: Default\n[poll] Last Built Revision: Revision " + r.hex(40) + " (refs/remotes/origin/main)\nDone. Took 0.41 sec\nNo changes\n", ns(r, lastEnd)})
	}
	if j.atomicTmp {
		// Jenkins died (or is) between writing the temp file and renaming it.
		files = append(files, textFile{"config.xml-atomic" + strconv.Itoa(r.between(100000, 999999)) + "tmp", cfg[:len(cfg)/2], ns(r, lastEnd)})
	}
	for _, f := range files {
		if err := w.file(j.rel+"/"+f.name, 0o644, f.t, f.data); err != nil {
			return err
		}
	}
	return nil
}

// textFile is a small file to write below some directory.
type textFile struct {
	name, data string
	t          time.Time
}

// writeLegacyLinks writes the symlinks Jenkins < 2.185 kept: builds/<permalink>
// -> N (or -1, dangling) and lastSuccessful/lastStable in the job dir, which
// point through those.
func writeLegacyLinks(w *writer, job string, links map[string]int, t time.Time) error {
	for _, name := range permalinkNames {
		target := "-1"
		if n, ok := links[name]; ok {
			target = strconv.Itoa(n)
		}
		if err := w.symlink(job+"/builds/"+name, target, t); err != nil {
			return err
		}
	}
	for _, l := range [][2]string{{"lastSuccessful", "builds/lastSuccessfulBuild"}, {"lastStable", "builds/lastStableBuild"}} {
		if err := w.symlink(job+"/"+l[0], l[1], t); err != nil {
			return err
		}
	}
	return nil
}

// writeJobWorkspace fills jobs/<x>/workspace and workspace@tmp, where old
// built-in-node builds left them; a backup must skip both.
func writeJobWorkspace(w *writer, job string, t time.Time, r *rng) error {
	files := []string{"pom.xml", "README.md", "src/main/java/com/example/App.java", "src/test/java/com/example/AppTest.java", "target/classes/com/example/App.class"}
	for _, f := range files {
		if err := w.file(job+"/workspace/"+f, 0o644, ns(r, t), expand("// {msg}\n{file}\n", r, "")+strings.Repeat("x", r.between(0, 4000))); err != nil {
			return err
		}
	}
	if err := w.random(job+"/workspace/target/app.jar", 0o644, ns(r, t), int64(r.between(kib, 64*kib)), r); err != nil {
		return err
	}
	dt := job + "/workspace@tmp/durable-" + r.hex(8) + "/"
	if err := w.file(dt+"script.sh", 0o755, ns(r, t), "#!/bin/sh -xe\n./mvnw -B verify\n"); err != nil {
		return err
	}
	return w.file(dt+"jenkins-log.txt", 0o644, ns(r, t), "")
}

// writeFolder writes a folder's or multibranch project's own files.
func (g *generator) writeFolder(w *writer, f folderPlan) error {
	r := newRNG(g.seed, "folder:"+f.rel)
	t := ns(r, epoch.Add(time.Duration(r.Int64N(int64(horizon/2)))))
	if !f.multibranch {
		if err := w.mkdir(f.rel + "/jobs"); err != nil {
			return err
		}
		return w.file(f.rel+"/config.xml", 0o644, t, folderXML(f.name, r))
	}
	if err := w.file(f.rel+"/config.xml", 0o644, t, multibranchXML(f.name, r)); err != nil {
		return err
	}
	scan := ns(r, epoch.Add(horizon-time.Duration(r.Int64N(int64(48*time.Hour)))))
	var log strings.Builder
	log.WriteString("Started by timer\n[" + scan.Format(time.UnixDate) + "] Starting branch indexing...\n")
	for range r.between(5, 40) {
		log.WriteString("Checking branch " + r.pick(branchNames) + "\n      ‘Jenkinsfile’ found\n    Met criteria\nNo changes detected: " + r.pick(branchNames) + " (still at " + r.hex(40) + ")\n")
	}
	log.WriteString("Finished: SUCCESS\n")
	if err := w.file(f.rel+"/indexing/indexing.log", 0o644, scan, log.String()); err != nil {
		return err
	}
	return w.file(f.rel+"/indexing/indexing.xml", 0o644, scan, xmlHead+"<jenkins.branch.MultiBranchProject_-BranchIndexing plugin=\"branch-api@2.1200.v4b_a_3da_2eb_db_4\">\n  <result>SUCCESS</result>\n  <timestamp>"+millis(scan)+"</timestamp>\n  <duration>"+strconv.Itoa(r.between(800, 90000))+"</duration>\n</jenkins.branch.MultiBranchProject_-BranchIndexing>")
}

// estimate is a rough cost used only to start the largest units first.
func (j jobPlan) estimate() int64 {
	var huge int64
	for _, h := range j.huge {
		huge += h
	}
	return huge + int64(j.builds)*64*kib
}
