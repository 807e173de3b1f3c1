// Command prune applies a retention policy to a store. See --help.
package main

import (
	"os"

	"github.com/homesnap/homesnap/internal/cli"
	"github.com/homesnap/homesnap/internal/version"
)

func main() {
	if version.Asked(os.Args[1:]) {
		version.Print(os.Stdout, "prune")
		return
	}
	os.Exit(cli.Main(cli.Prune))
}
