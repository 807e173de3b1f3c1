// Command restore restores a snapshot of a Jenkins home from a store: as an
// init container before the controller starts, or by hand. See --help.
package main

import (
	"os"

	"github.com/homesnap/homesnap/internal/cli"
	"github.com/homesnap/homesnap/internal/version"
)

func main() {
	if version.Asked(os.Args[1:]) {
		version.Print(os.Stdout, "restore")
		return
	}
	os.Exit(cli.Main(cli.Restore))
}
