// Command jenkins-standin plays Jenkins in the container tests, where the
// real image cannot be pulled: it answers on :8080, starts a build of a job
// in $JENKINS_HOME when it starts, and records the build's end when it
// stops (SIGTERM), as Jenkins writes build.xml while it shuts down. With
// STANDIN_WRITE_EVERY (a Go duration) it also appends a line to the build's
// log at that pace until SIGTERM, as a running build does (the Kubernetes
// lifecycle tests, test/k8s, delete the pod mid-write).
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
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "jenkins-standin:", err)
		os.Exit(1)
	}
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
