package gen

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// buildSpec is everything needed to write one builds/N directory; Generate
// and Churn both go through it.
type buildSpec struct {
	number         int
	pipeline       bool
	start          time.Time
	duration       time.Duration
	result         string // "" while the build is running
	logSize        int64
	flowNodes      int
	completedStore bool // workflow-completed/flowNodeStore.xml instead of workflow/*.xml
	artifacts      []artifact
	emptyArchive   bool
	commits        int
	junit          bool
	junitMax       int // most test cases its junitResult.xml may hold
	longPath       bool
}

type artifact struct {
	rel  string // below archive/
	size int64
	link string // non-empty: a relative symlink to this target instead
}

// sizing is the part of a Preset that shapes single builds.
type sizing struct {
	logMedian      int64
	logSigma       float64
	logMax         int64
	artifactRate   float64
	artifactMedian int64
	flowNodes      int
	junitMax       int // 0: 400
}

func (p Preset) sizing() sizing {
	return sizing{p.LogMedian, p.LogSigma, p.LogMax, p.ArtifactRate, p.ArtifactMedian, p.FlowNodes, p.JUnitMax}
}

func pickResult(r *rng) string {
	switch v := r.Float64(); {
	case v < 0.80:
		return "SUCCESS"
	case v < 0.92:
		return "FAILURE"
	case v < 0.97:
		return "UNSTABLE"
	default:
		return "ABORTED"
	}
}

// newBuildSpec draws a build's shape.
func newBuildSpec(r *rng, sz sizing, number int, pipeline bool, start time.Time) buildSpec {
	s := buildSpec{
		number:   number,
		pipeline: pipeline,
		start:    start,
		duration: time.Duration(r.size(int64(4*time.Minute), 1.0, int64(5*time.Second), int64(6*time.Hour))) + time.Duration(r.IntN(1e9)),
		result:   pickResult(r),
		logSize:  r.size(sz.logMedian, sz.logSigma, 300, sz.logMax),
		commits:  r.between(0, 4) * r.IntN(2),
		junit:    r.chance(0.5),
		junitMax: cmp.Or(sz.junitMax, 400),
	}
	if pipeline {
		s.flowNodes = max(4, r.between(sz.flowNodes/2, sz.flowNodes*3/2))
		s.completedStore = r.chance(0.5)
	}
	if r.chance(sz.artifactRate) {
		ver := placeholder("ver", r, "")
		art := r.pick(wordsArt)
		for i := range r.between(1, 3) {
			name := []string{"target/" + art + "-" + ver + ".jar", "dist/" + art + "-" + ver + ".tar.gz", "build/reports/coverage.zip"}[i]
			s.artifacts = append(s.artifacts, artifact{rel: name, size: r.size(sz.artifactMedian, 1.2, 512, 64*mib)})
		}
		if r.chance(0.2) {
			s.artifacts = append(s.artifacts, artifact{rel: "target/" + art + "-latest.jar", link: art + "-" + ver + ".jar"})
		}
	} else {
		s.emptyArchive = r.chance(0.05)
	}
	return s
}

// ns adds a sub-millisecond offset so mtimes have nanosecond parts.
func ns(r *rng, t time.Time) time.Time { return t.Add(time.Duration(r.IntN(1_000_000))) }

// writeBuild writes builds/N below job.
func writeBuild(w *writer, job string, s buildSpec, r *rng, lt *logText) error {
	dir := job + "/builds/" + strconv.Itoa(s.number) + "/"
	end := s.start.Add(s.duration)
	tail := "Finished: " + s.result + "\n"
	if s.pipeline && s.result != "" {
		tail = "[Pipeline] End of Pipeline\n" + tail
	}
	if s.result == "" {
		tail = ""
	}
	name := job[strings.LastIndexByte(job, '/')+1:]
	if err := w.stream(dir+"log", 0o644, ns(r, end), func(out io.Writer) (int64, error) {
		return lt.write(out, s.logSize, s.start, lt.header(name), tail)
	}); err != nil {
		return err
	}
	if err := writeFlow(w, dir, s, r); err != nil {
		return err
	}
	if err := writeChangelog(w, dir, s, r); err != nil {
		return err
	}
	if s.junit {
		if err := w.file(dir+"junitResult.xml", 0o644, ns(r, end), junitXML(r.between(20, s.junitMax), r)); err != nil {
			return err
		}
	}
	if err := writeArtifacts(w, dir, s, r); err != nil {
		return err
	}
	return w.file(dir+"build.xml", 0o644, ns(r, end.Add(40*time.Millisecond)), buildXML(s, r))
}

// writeFlow writes a Pipeline build's flow nodes, log-index and, while the
// build runs, its program.dat.
func writeFlow(w *writer, dir string, s buildSpec, r *rng) error {
	if !s.pipeline {
		return nil
	}
	end := s.start.Add(s.duration)
	var idx strings.Builder
	for i := range s.flowNodes / 2 {
		fmt.Fprintf(&idx, "%d %d\n", s.logSize*int64(i)/int64(s.flowNodes/2+1), 2*i+3)
	}
	if err := w.file(dir+"log-index", 0o644, ns(r, end), idx.String()); err != nil {
		return err
	}
	if s.completedStore && s.result != "" {
		return w.file(dir+"workflow-completed/flowNodeStore.xml", 0o644, ns(r, end), flowNodeStoreXML(s.flowNodes, s.start, r))
	}
	step := s.duration / time.Duration(s.flowNodes+1)
	for id := 2; id < s.flowNodes+2; id++ {
		t := ns(r, s.start.Add(step*time.Duration(id-1)))
		if err := w.file(dir+"workflow/"+strconv.Itoa(id)+".xml", 0o644, t, flowNodeXML(id, t, r)); err != nil {
			return err
		}
	}
	if s.result == "" {
		return w.random(dir+"program.dat", 0o644, ns(r, end), int64(r.between(2*kib, 40*kib)), r)
	}
	return nil
}

// writeChangelog: freestyle builds always have changelog.xml (empty without
// changes, as the git plugin leaves it); Pipeline writes changelog<N>.xml
// per checkout only when there was something to record.
func writeChangelog(w *writer, dir string, s buildSpec, r *rng) error {
	t := ns(r, s.start.Add(2*time.Second))
	switch {
	case !s.pipeline:
		return w.file(dir+"changelog.xml", 0o644, t, changelog(s.commits, s.start, r))
	case s.commits > 0:
		return w.file(dir+"changelog0.xml", 0o644, t, changelog(s.commits, s.start, r))
	}
	return nil
}

func writeArtifacts(w *writer, dir string, s buildSpec, r *rng) error {
	end := s.start.Add(s.duration)
	if s.emptyArchive {
		return w.mkdir(dir + "archive")
	}
	for _, a := range s.artifacts {
		var err error
		if a.link != "" {
			err = w.symlink(dir+"archive/"+a.rel, a.link, ns(r, end))
		} else {
			err = w.random(dir+"archive/"+a.rel, 0o644, ns(r, end), a.size, r)
		}
		if err != nil {
			return err
		}
	}
	if s.longPath {
		return writeLongPaths(w, dir+"archive/", end, r)
	}
	return nil
}

// writeLongPaths archives reports whose relative paths exceed 255 bytes and
// whose names are exactly 255 bytes (the per-component limit), one ASCII and
// one multi-byte UTF-8.
func writeLongPaths(w *writer, dir string, t time.Time, r *rng) error {
	deep := dir + "target/surefire-reports/com/example/billing/legacy/invoicing/integration/regression/staging/"
	ascii := "TEST-com.example.billing.legacy.invoicing.integration.regression.InvoiceReconciliationEndToEndTest"
	for len(ascii) < 255-len(".xml") {
		ascii += "-Scenario"
	}
	ascii = ascii[:255-len(".xml")] + ".xml"
	multi := strings.Repeat("é", 125) + ".json"
	if err := w.file(deep+ascii, 0o644, ns(r, t), junitXML(40, r)); err != nil {
		return err
	}
	return w.file(deep+multi, 0o644, ns(r, t), "{\"cases\": 40}\n")
}
