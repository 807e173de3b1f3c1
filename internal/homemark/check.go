package homemark

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrNoHome means no home was configured.
var ErrNoHome = errors.New("no home given")

// Check verifies the home is an existing directory; create makes it.
func Check(home string, create bool) error {
	if home == "" {
		return ErrNoHome
	}
	if !filepath.IsAbs(home) {
		return fmt.Errorf("home %q must be an absolute path", home)
	}
	fi, err := os.Stat(home)
	if create && errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(home, 0o755)
	}
	if err != nil {
		return fmt.Errorf("home %s: %w", home, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("home %s is not a directory", home)
	}
	return nil
}
