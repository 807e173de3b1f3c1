// Command snapshot takes incremental snapshots of a Jenkins home into a
// store: once (--once) or as a sidecar. See --help.
package main

import (
	"os"

	"github.com/homesnap/homesnap/internal/cli"
	"github.com/homesnap/homesnap/internal/version"
)

func main() {
	if version.Asked(os.Args[1:]) {
		version.Print(os.Stdout, "snapshot")
		return
	}
	os.Exit(cli.Main(cli.Snapshot))
}
