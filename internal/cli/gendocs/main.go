// Command gendocs writes the files generated from homesnap's command
// table (cli.Generated: the man pages, the completion scripts) into the
// repository, and removes those of a command that is gone. Run by
// `go generate ./internal/cli`, or from anywhere in the repository:
//
//	go run ./internal/cli/gendocs
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/homesnap/homesnap/internal/cli"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	files, err := cli.Generated()
	if err != nil {
		return err
	}
	dirs := map[string]bool{}
	for name, data := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		dirs[filepath.Dir(path)] = true
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	// The directories hold generated files only: one no longer generated
	// (a command removed or renamed) goes.
	for dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			rel, _ := filepath.Rel(root, filepath.Join(dir, e.Name()))
			if _, ok := files[filepath.ToSlash(rel)]; !ok && e.Type().IsRegular() {
				if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
					return err
				}
				fmt.Fprintln(os.Stderr, "gendocs: removed", rel)
			}
		}
	}
	return nil
}

// repoRoot is the nearest directory up from here that holds go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory: run it in the homesnap repository")
		}
		dir = parent
	}
}
