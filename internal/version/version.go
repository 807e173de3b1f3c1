// Package version says which build of homesnap is running. The release
// build sets Version and Revision with the linker:
//
//	go build -ldflags "-X github.com/homesnap/homesnap/internal/version.Version=0.1.0 \
//	  -X github.com/homesnap/homesnap/internal/version.Revision=$(git rev-parse HEAD)"
//
// A plain `go build` in a checkout still reports the commit, from the VCS
// stamp Go embeds.
package version

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set at link time; see the package comment.
var (
	Version  = "dev"
	Revision = ""
)

// Info is what a build reports about itself.
type Info struct {
	Version, Revision, GoVersion string
}

// Get returns this build's version, revision and Go version. The revision
// falls back to the VCS stamp (with "-dirty" for a modified tree), then to
// "unknown".
func Get() Info {
	i := Info{Version: Version, Revision: Revision, GoVersion: runtime.Version()}
	if i.Revision == "" {
		i.Revision = "unknown"
		if b, ok := debug.ReadBuildInfo(); ok {
			var rev, dirty string
			for _, s := range b.Settings {
				switch {
				case s.Key == "vcs.revision":
					rev = s.Value
				case s.Key == "vcs.modified" && s.Value == "true":
					dirty = "-dirty"
				}
			}
			if rev != "" {
				i.Revision = rev + dirty
			}
		}
	}
	return i
}

// Asked reports whether args ask for the version and nothing else.
func Asked(args []string) bool {
	return len(args) == 1 && (args[0] == "--version" || args[0] == "-version")
}

// Print writes one line naming the program and its build.
func Print(w io.Writer, program string) {
	i := Get()
	fmt.Fprintf(w, "%s %s (revision %s, %s, %s/%s)\n", program, i.Version, i.Revision, i.GoVersion, runtime.GOOS, runtime.GOARCH)
}
