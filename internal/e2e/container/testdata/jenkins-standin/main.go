// Command jenkins-standin plays Jenkins in the container tests, where the
// real image cannot be pulled: it answers on :8080, starts a build of a job
// in $JENKINS_HOME when it starts, and records the build's end when it
// stops (SIGTERM), as Jenkins writes build.xml while it shuts down.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
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
	fmt.Println("jenkins-standin: up")
	<-ctx.Done()
	// Stop answering first, as Jenkins does, then end the build.
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(shut)
	time.Sleep(time.Second)
	if err := write("jobs/standin/builds/"+boot+"/build.xml", "<build><result>ABORTED</result><stopped>"+time.Now().UTC().Format(time.RFC3339Nano)+"</stopped></build>\n"); err != nil {
		return err
	}
	fmt.Println("jenkins-standin: stopped")
	return nil
}
