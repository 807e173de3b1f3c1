// Command restore restores a snapshot of a Jenkins home from a store: as an
// init container before the controller starts, or by hand. See --help.
package main

import (
	"os"

	"github.com/homesnap/homesnap/internal/cli"
)

func main() {
	os.Exit(cli.Main("restore"))
}
