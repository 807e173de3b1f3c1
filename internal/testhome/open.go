package testhome

import (
	"os"
	"testing"

	"github.com/homesnap/homesnap/internal/homefs"
)

// Open opens the home at dir for a test, as a command opens its home
// (creating the directory first, as a restore's first boot does), and
// closes it when the test ends.
func Open(t testing.TB, dir string) *homefs.Home {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := homefs.OpenHome(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}
