package testhome

import (
	"os"
	"path/filepath"
	"testing"
)

// Change applies the edits a live Jenkins makes between two snapshots.
func Change(t testing.TB, home string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := func(rel string) string { return filepath.Join(home, filepath.FromSlash(rel)) }
	f, err := os.OpenFile(p("jobs/test/builds/2/log"), os.O_APPEND|os.O_WRONLY, 0)
	must(err)
	_, err = f.WriteString("Finished: SUCCESS\n")
	must(err)
	must(f.Close())
	must(os.WriteFile(p("jobs/test/config.xml"), []byte("<project><description>edited</description></project>\n"), 0o644))
	must(os.RemoveAll(p("jobs/parameterized-windows/builds/1")))
	must(os.MkdirAll(p("jobs/test/builds/3"), 0o755))
	must(os.WriteFile(p("jobs/test/builds/3/build.xml"), []byte("<build/>\n"), 0o644))
	must(os.Chmod(p("nodes/agent-1/config.xml"), 0o600))
	must(os.Remove(p("jobs/test/builds/lastSuccessfulBuild")))
	must(os.Symlink("3", p("jobs/test/builds/lastSuccessfulBuild")))
	must(os.Remove(p("secret.key.not-so-secret")))
	must(os.Symlink("secret.key", p("secret.key.not-so-secret"))) // a file replaced by a symlink
}
