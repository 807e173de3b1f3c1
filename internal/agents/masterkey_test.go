package agents

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/homefs"
)

// openHome opens a test's home as a command does, closed at the end.
func openHome(t *testing.T, path string) *homefs.Home {
	t.Helper()
	h, err := homefs.OpenHome(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func TestInstallMasterKeyMovesADifferentKeyAside(t *testing.T) {
	home := t.TempDir()
	secrets := filepath.Join(home, "secrets")
	os.Mkdir(secrets, 0o700)
	os.WriteFile(filepath.Join(secrets, "master.key"), []byte("old"), 0o644)
	h := openHome(t, home)
	if err := InstallMasterKey(h, []byte("new"), zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(secrets, "master.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("installed key: %v, %v", fi, err)
	}
	if got, _ := os.ReadFile(filepath.Join(secrets, "master.key")); string(got) != "new" {
		t.Fatalf("installed %q", got)
	}
	entries, _ := os.ReadDir(secrets)
	var aside []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "master.key.homesnap-replaced-") {
			aside = append(aside, e.Name())
		}
	}
	if len(aside) != 1 {
		t.Fatalf("entries moved aside: %v (all: %v)", aside, entries)
	}
	if got, _ := os.ReadFile(filepath.Join(secrets, aside[0])); string(got) != "old" {
		t.Fatalf("the old key was not kept: %q", got)
	}
	// The same key again: nothing to do, nothing moved.
	if err := InstallMasterKey(h, []byte("new"), zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if entries2, _ := os.ReadDir(secrets); len(entries2) != len(entries) {
		t.Fatalf("a second install changed secrets/: %v", entries2)
	}
}

func TestReadMasterKeyFileRefusesEmpty(t *testing.T) {
	p := filepath.Join(t.TempDir(), "k")
	os.WriteFile(p, []byte(" \n"), 0o600)
	if _, err := ReadMasterKeyFile(p); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("err = %v", err)
	}
	if _, err := ReadMasterKeyFile(p + "-missing"); err == nil || !strings.Contains(err.Error(), "master key file") {
		t.Fatalf("err = %v", err)
	}
}
