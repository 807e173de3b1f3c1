package gen

import (
	"fmt"
	"strconv"
	"time"
)

// The directories below are part of a real home but must never be selected
// for backup: they are caches, downloads or scratch space.

var knownPlugins = []string{"git", "git-client", "workflow-job", "workflow-cps", "workflow-api", "workflow-support", "workflow-multibranch", "branch-api", "cloudbees-folder", "credentials", "credentials-binding", "kubernetes", "kubernetes-client-api", "ssh-slaves", "ssh-credentials", "plain-credentials", "junit", "matrix-auth", "timestamper", "pipeline-stage-view", "configuration-as-code", "job-dsl", "blueocean", "docker-workflow", "scm-api", "structs", "script-security", "mailer", "display-url-api", "jackson2-api"}

func pluginName(i int) string {
	if i < len(knownPlugins) {
		return knownPlugins[i]
	}
	return knownPlugins[i%len(knownPlugins)] + "-ext" + strconv.Itoa(i/len(knownPlugins))
}

// writePlugins writes plugins/<name>.jpi archives next to their exploded
// directories, plus the .pinned/.disabled/.bak markers Jenkins leaves.
func (g *generator) writePlugins(w *writer) error {
	r := newRNG(g.seed, "plugins")
	for i := range max(1, g.p.Plugins) {
		name := pluginName(i)
		t := ns(r, epoch.Add(time.Duration(r.Int64N(int64(horizon)))))
		size := r.size(g.p.PluginMedian, 1.0, 4*kib, 30*mib)
		if err := w.random("plugins/"+name+".jpi", 0o644, t, size, r); err != nil {
			return err
		}
		manifest := fmt.Sprintf("Manifest-Version: 1.0\nShort-Name: %s\nPlugin-Version: %s\nJenkins-Version: 2.440.3\nLong-Name: %s plugin\n", name, placeholder("ver", r, ""), name)
		files := []textFile{{"META-INF/MANIFEST.MF", manifest, t}, {".timestamp2", "", t}}
		for _, f := range files {
			if err := w.file("plugins/"+name+"/"+f.name, 0o644, ns(r, f.t), f.data); err != nil {
				return err
			}
		}
		if err := w.random("plugins/"+name+"/WEB-INF/lib/"+name+".jar", 0o644, ns(r, t), size*9/10, r); err != nil {
			return err
		}
		if i == 1 {
			if err := w.file("plugins/"+name+".jpi.disabled", 0o644, ns(r, t), ""); err != nil {
				return err
			}
		}
		if i == 2 {
			if err := w.random("plugins/"+name+".bak", 0o644, ns(r, t.Add(-time.Hour)), size, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeWar writes the exploded war/ Jenkins unpacks at every start.
func (g *generator) writeWar(w *writer) error {
	r := newRNG(g.seed, "war")
	t := ns(r, epoch.Add(horizon-3*time.Hour))
	if err := w.file("war/META-INF/MANIFEST.MF", 0o644, t, "Manifest-Version: 1.0\nMain-Class: executable.Main\nJenkins-Version: 2.479.3\n"); err != nil {
		return err
	}
	if err := w.file("war/WEB-INF/web.xml", 0o644, t, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<web-app version=\"5.0\">\n  <display-name>Jenkins v2.479.3</display-name>\n</web-app>\n"); err != nil {
		return err
	}
	for i := range max(3, g.p.Plugins/2) {
		if err := w.random(fmt.Sprintf("war/WEB-INF/lib/lib-%03d.jar", i), 0o644, ns(r, t), r.size(g.p.PluginMedian, 1.0, 2*kib, 8*mib), r); err != nil {
			return err
		}
	}
	return w.file("war/images/svgs/logo.svg", 0o644, t, "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 24 24\"><circle cx=\"12\" cy=\"12\" r=\"10\"/></svg>\n")
}

// writeLogsAndCaches writes logs/tasks/*.log and caches/git-<hash>/ mirrors.
func (g *generator) writeLogsAndCaches(w *writer) error {
	r := newRNG(g.seed, "logs")
	t := epoch.Add(horizon - 90*time.Minute)
	for _, name := range []string{"Download metadata", "Fingerprint cleanup", "Workspace clean-up", "Periodic background build discarder", "Telemetry collection", "Connection Activity monitoring to agents"} {
		body := "Started " + t.Format(time.UnixDate) + "\n" + name + " completed\nFinished at " + t.Add(2*time.Second).Format(time.UnixDate) + ". " + strconv.Itoa(r.between(1, 9000)) + "ms\n"
		if err := w.file("logs/tasks/"+name+".log", 0o644, ns(r, t), body); err != nil {
			return err
		}
	}
	for range max(1, g.p.Multibranch) {
		dir := "caches/git-" + r.hex(32) + "/.git/"
		pack := r.hex(40)
		files := []textFile{
			{"HEAD", "ref: refs/heads/master\n", t},
			{"config", "[core]\n\trepositoryformatversion = 0\n\tbare = false\n[remote \"origin\"]\n\turl = https://git.example.com/" + r.pick(serviceNames) + ".git\n", t},
			{"objects/pack/pack-" + pack + ".idx", "", t},
		}
		for _, f := range files {
			if err := w.file(dir+f.name, 0o644, ns(r, f.t), f.data); err != nil {
				return err
			}
		}
		if err := w.random(dir+"objects/pack/pack-"+pack+".pack", 0o644, ns(r, t), r.size(4*g.p.ArtifactMedian, 1.0, kib, 256*mib), r); err != nil {
			return err
		}
	}
	return nil
}

// writeFingerprints writes fingerprints/xx/yy/<rest>.xml records.
func (g *generator) writeFingerprints(w *writer) error {
	r := newRNG(g.seed, "fingerprints")
	for range g.p.Fingerprints {
		md5 := r.hex(32)
		t := ns(r, epoch.Add(time.Duration(r.Int64N(int64(horizon)))))
		job := r.pick(serviceNames)
		n := strconv.Itoa(r.between(1, 900))
		body := xmlHead + "<fingerprint>\n  <timestamp>" + t.Format("2006-01-02 15:04:05.000 MST") + "</timestamp>\n  <original>\n    <name>" + job + "</name>\n    <number>" + n + "</number>\n  </original>\n  <md5sum>" + md5 + "</md5sum>\n  <fileName>target/" + r.pick(wordsArt) + ".jar</fileName>\n  <usages>\n    <entry>\n      <string>" + job + "</string>\n      <ranges>" + n + "</ranges>\n    </entry>\n  </usages>\n  <facets/>\n</fingerprint>"
		if err := w.file("fingerprints/"+md5[:2]+"/"+md5[2:4]+"/"+md5[4:]+".xml", 0o644, t, body); err != nil {
			return err
		}
	}
	return nil
}

// writeRootWorkspace fills workspace/ (the built-in node's workspaces), with
// @tmp and @2 siblings and an executable script.
func (g *generator) writeRootWorkspace(w *writer) error {
	r := newRNG(g.seed, "workspace")
	t := epoch.Add(horizon - 5*time.Hour)
	dirs := []string{"workspace/" + r.pick(serviceNames), "workspace/" + r.pick(serviceNames) + "@2"}
	for i := range max(2, g.p.WorkspaceFiles) {
		dir := dirs[i%len(dirs)]
		var err error
		switch i % 4 {
		case 0:
			err = w.random(fmt.Sprintf("%s/node_modules/pkg-%d/index.js.map", dir, i), 0o644, ns(r, t), int64(r.between(256, 16*kib)), r)
		case 1:
			err = w.file(fmt.Sprintf("%s/src/%s/File%d.java", dir, r.pick(wordsPkg), i), 0o644, ns(r, t), expand("package com.example.{pkg};\n// {msg}\nclass {cls} {}\n", r, ""))
		default:
			err = w.file(fmt.Sprintf("%s/docs/page-%d.md", dir, i), 0o644, ns(r, t), expand("# {cls}\n\n{msg}\n", r, ""))
		}
		if err != nil {
			return err
		}
	}
	return w.file(dirs[0]+"@tmp/durable-"+r.hex(8)+"/script.sh", 0o755, ns(r, t), "#!/bin/sh -xe\nmake test\n")
}
