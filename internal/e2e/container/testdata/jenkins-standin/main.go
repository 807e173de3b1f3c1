// Command jenkins-standin plays Jenkins in the container tests, where the
// real image cannot be pulled: it answers on :8080, starts a build of a job
// in $JENKINS_HOME when it starts, and records the build's end when it
// stops (SIGTERM), as Jenkins writes build.xml while it shuts down. With
// STANDIN_WRITE_EVERY (a Go duration) it also appends a line to the build's
// log at that pace until SIGTERM, as a running build does (the Kubernetes
// lifecycle tests, test/k8s, delete the pod mid-write).
//
// The Jenkins chart's pod runs two more programs, which the Kubernetes tests
// render as the chart makes them: the chart's init container runs
// `sh /var/jenkins_config/apply_config.sh` in the Jenkins image, and its
// config-reload containers run kiwigrid/k8s-sidecar. Installed as /bin/sh in
// the stand-in image and as the entry point of a k8s-sidecar stand-in, this
// program plays those too, by the name it is run as.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func main() {
	play := run
	switch filepath.Base(os.Args[0]) {
	case "sh":
		play = chartInit
	case "k8s-sidecar":
		play = configReload
	}
	if err := play(); err != nil {
		fmt.Fprintln(os.Stderr, "jenkins-standin:", err)
		os.Exit(1)
	}
}

// chartInit does to the home what the chart's apply_config.sh does (it runs
// after homesnap's restore): it marks the setup wizard done and copies the
// plugin list in. The plugins themselves are left out: nothing downloads.
func chartInit() error {
	if len(os.Args) != 2 {
		return fmt.Errorf("sh: want one script, got %q", os.Args[1:])
	}
	if _, err := os.Stat(os.Args[1]); err != nil {
		return fmt.Errorf("sh: the chart's script: %w", err)
	}
	plugins, err := os.ReadFile(filepath.Join(filepath.Dir(os.Args[1]), "plugins.txt"))
	if err != nil {
		return err
	}
	version := os.Getenv("JENKINS_VERSION") + "\n"
	for rel, content := range map[string]string{"jenkins.install.UpgradeWizard.state": version,
		"jenkins.install.InstallUtil.lastExecVersion": version, "plugins.txt": string(plugins)} {
		if err := write(rel, content); err != nil {
			return err
		}
	}
	fmt.Println("jenkins-standin: chart init: finished initialization (" + os.Args[1] + ")")
	return nil
}

// configReload plays kiwigrid/k8s-sidecar: METHOD=LIST (the init
// container) lists once and ends; otherwise it watches until SIGTERM.
func configReload() error {
	if os.Getenv("METHOD") == "LIST" {
		fmt.Println("jenkins-standin: k8s-sidecar: listed " + os.Getenv("FOLDER"))
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fmt.Println("jenkins-standin: k8s-sidecar: watching " + os.Getenv("FOLDER"))
	<-ctx.Done()
	return nil
}

func write(rel, content string) error {
	p := filepath.Join(os.Getenv("JENKINS_HOME"), rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(content), 0o644)
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	boot := time.Now().UTC().Format("20060102T150405.000000000")
	if err := write("jobs/standin/builds/"+boot+"/log", "Started at "+boot+"\n"); err != nil {
		return err
	}
	srv := &http.Server{Addr: ":8080", ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "Jenkins stand-in") })}
	go srv.ListenAndServe()
	fmt.Println("jenkins-standin: up, build " + boot)
	writes := 0
	if every, err := time.ParseDuration(os.Getenv("STANDIN_WRITE_EVERY")); err == nil && every > 0 {
		log, err := os.OpenFile(filepath.Join(os.Getenv("JENKINS_HOME"), "jobs/standin/builds", boot, "log"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		defer log.Close()
		for tick := time.NewTicker(every); ctx.Err() == nil; {
			select {
			case <-tick.C:
				writes++
				if _, err := log.WriteString("step " + strconv.Itoa(writes) + "\n"); err != nil {
					return err
				}
			case <-ctx.Done():
			}
		}
	}
	<-ctx.Done()
	// Stop answering first, as Jenkins does, then end the build.
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(shut)
	time.Sleep(time.Second)
	if err := write("jobs/standin/builds/"+boot+"/build.xml", "<build><result>ABORTED</result><stopped>"+time.Now().UTC().Format(time.RFC3339Nano)+"</stopped></build>\n"); err != nil {
		return err
	}
	fmt.Printf("jenkins-standin: stopped after %d steps\n", writes)
	return nil
}
