//go:build !homesnap_nos3 && !homesnap_nominio && !homesnap_nogcs && !homesnap_noazure

package all_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/testenv"
)

// The default build holds every backend.
func TestDefaultBuildHasEveryBackend(t *testing.T) {
	want := []string{"az", "azblob", "file", "gs", "minio", "s3"}
	if got := store.Schemes(); !slices.Equal(got, want) {
		t.Errorf("Schemes() = %q, want %q", got, want)
	}
}

// goCommand runs go in the repository's root and returns its output.
func goCommand(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = "../../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Each build tag leaves its backend's modules out of the homesnap binary
// and keeps the others': go list reads the tagged build's dependencies
// without compiling it.
func TestBuildTags(t *testing.T) {
	modules := func(tags []string) []string {
		out := goCommand(t, "list", "-tags", strings.Join(tags, ","), "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "./cmd/homesnap")
		return strings.Fields(out)
	}
	for _, only := range backends {
		t.Run("only "+only.schemes[0], func(t *testing.T) {
			var tags []string
			for _, b := range backends {
				if b.tag != only.tag {
					tags = append(tags, b.tag)
				}
			}
			got := modules(tags)
			for _, b := range backends {
				for _, m := range b.modules {
					if in := slices.Contains(got, m); in != (b.tag == only.tag) {
						t.Errorf("-tags %s: module %s linked: %v", strings.Join(tags, ","), m, in)
					}
				}
			}
		})
	}
}

// The build with the file store only compiles, and refuses every other
// scheme naming its tag (TestSchemes, run in that build).
func TestFileOnlyBuild(t *testing.T) {
	testenv.Long(t, "compiles the store packages with every backend left out")
	var all []string
	for _, b := range backends {
		all = append(all, b.tag)
	}
	out := goCommand(t, "test", "-count=1", "-tags", strings.Join(all, ","), "-run", "^TestSchemes$", "-v", "./internal/store/all")
	if !strings.Contains(out, "schemes: [file]") || !strings.Contains(out, "--- PASS: TestSchemes") {
		t.Errorf("go test -tags %s: want TestSchemes passing with only the file store:\n%s", strings.Join(all, ","), out)
	}
}
