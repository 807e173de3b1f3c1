// Command pause is the pod sandbox's process in the test cluster
// (scripts/k8s.sh builds it into the image containerd's sandbox_image
// names, so nothing is pulled): it holds the pod's namespaces until it is
// told to stop, and reaps the orphans a shared process namespace hands it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
