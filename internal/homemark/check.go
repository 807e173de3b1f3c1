package homemark

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrNoHome means no home was configured.
var ErrNoHome = errors.New("no home given")

// Check verifies the home at path (the configured one: the command calls
// it before it opens the home, once) is an existing directory; create
// makes it (a first boot).
func Check(path string, create bool) error {
	if path == "" {
		return ErrNoHome
	}
	if !filepath.IsAbs(path) {
		return fmt.Errorf("home %q must be an absolute path", path)
	}
	fi, err := os.Stat(path)
	if create && errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(path, 0o755)
	}
	if err != nil {
		return fmt.Errorf("home %s: %w", path, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("home %s is not a directory", path)
	}
	return nil
}
