// Command snapshot takes incremental snapshots of a Jenkins home into a
// store: once (--once) or as a sidecar. See --help.
package main

import (
	"os"

	"github.com/homesnap/homesnap/internal/cli"
)

func main() {
	os.Exit(cli.Main("snapshot"))
}
