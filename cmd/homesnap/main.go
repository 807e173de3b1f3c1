// Command homesnap keeps a Jenkins controller's home across pod restarts:
// `homesnap restore` (the init container, disaster recovery), `homesnap
// snapshot` (the sidecar), prune, list, verify, check-agents. Invoked
// through a link named restore, snapshot or prune (or homesnap-restore,
// ...), it runs that command, as the three binaries of earlier releases
// did. See `homesnap --help`.
package main

import (
	"os"

	"github.com/homesnap/homesnap/internal/cli"
)

func main() {
	os.Exit(cli.Homesnap())
}
