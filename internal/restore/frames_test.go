package restore

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/homesnap/homesnap/internal/snaptest"
)

// A snapshot reuses its frame and load buffers from job to job: a home of
// many small and a few large files, text that compresses and random bytes
// that do not, over more frames and jobs than the buffers kept, restores
// byte-exact.
func TestRestoreOfMixedContentOverManyFramesIsExact(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	text := bytes.Repeat([]byte("12:00:01 [Pipeline] sh + mvn -B test\nTests run: 42, Failures: 0\n"), 1<<10)
	for i := range 120 {
		dir := fmt.Sprintf("jobs/mixed/builds/%d/", i)
		snaptest.WriteRandomFile(t, home, dir+"archive/app.jar", 20<<10+i*512)
		snaptest.Write(t, home, dir+"log", fmt.Sprintf("build %d\n%s", i, text[:40<<10+i*97]))
	}
	snaptest.WriteRandomFile(t, home, "jobs/mixed/builds/0/archive/big.bin", 5<<20+3)
	snaptest.Write(t, home, "jobs/mixed/builds/1/archive/big.log", string(bytes.Repeat(text, 6)))
	want := snaptest.Selected(t, home)
	snaptest.Snap(t, home, st)
	target := t.TempDir()
	if err := restore(target, st, ""); err != nil {
		t.Fatal(err)
	}
	snaptest.AssertSame(t, want, snaptest.All(t, target))
}
