// Command prune applies a retention policy to a store. See --help.
package main

import (
	"os"

	"github.com/homesnap/homesnap/internal/cli"
)

func main() {
	os.Exit(cli.Main("prune"))
}
