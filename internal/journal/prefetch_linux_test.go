//go:build linux

package journal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/homefs"
)

// The warm-up takes whatever the paths are (files, directories, paths
// through a symlink, gone ones), and its stop ends every goroutine it
// started, also when it is stopped half-way.
func TestPrefetchStopsItsWorkers(t *testing.T) {
	home := t.TempDir()
	outside := t.TempDir()
	var paths []string
	for i := range 200 {
		rel := fmt.Sprintf("d%d/f", i)
		switch i % 4 {
		case 0:
			os.MkdirAll(filepath.Join(home, filepath.Dir(rel)), 0o755)
			os.WriteFile(filepath.Join(home, rel), nil, 0o644)
		case 1:
			os.Symlink(outside, filepath.Join(home, fmt.Sprintf("d%d", i)))
		case 2:
			os.MkdirAll(filepath.Join(home, rel), 0o755)
		} // 3: gone
		paths = append(paths, rel)
	}
	root, err := homefs.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	before := runtime.NumGoroutine()
	prefetch(context.Background(), root, paths)() // to the end
	ctx, cancel := context.WithCancel(context.Background())
	stop := prefetch(ctx, root, paths)
	cancel()
	stop() // half-way
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after the prefetches stopped, %d before", n, before)
	}
}
