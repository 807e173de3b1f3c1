package agents

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/jenkins"
	"github.com/homesnap/homesnap/internal/jenkins/jenkinstest"
)

// TestFirstBootRefusesAMasterKeyThatUnwrapsNothing: on a first boot
// (nothing restored), a master key kept out of the store is installed
// only when it unwraps the keys the home already has; a wrong one is
// refused, naming the key it fails on, and nothing is installed.
func TestFirstBootRefusesAMasterKeyThatUnwrapsNothing(t *testing.T) {
	path := t.TempDir()
	if err := jenkinstest.WriteKeys(path); err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(path, filepath.FromSlash(jenkins.MasterKeyPath))
	right, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(keyPath) // kept out of the store: the Secret holds it
	home := openHome(t, path)
	wrong := []byte(strings.Repeat("ab", 128))

	err = NewRestoreCheck(home, wrong, false, zerolog.Nop()).AfterCommit(context.Background(), home, true)
	if err == nil || !strings.Contains(err.Error(), "does not unwrap") {
		t.Fatalf("a wrong master key on a first boot: %v, want refused", err)
	}
	if _, err := os.Lstat(keyPath); !os.IsNotExist(err) {
		t.Fatalf("a refused key was installed: %v", err)
	}
	if err := NewRestoreCheck(home, right, false, zerolog.Nop()).AfterCommit(context.Background(), home, true); err != nil {
		t.Fatalf("the home's own master key: %v", err)
	}
	if got, err := os.ReadFile(keyPath); err != nil || string(got) != string(right) {
		t.Fatalf("installed %q, %v", got, err)
	}
}
