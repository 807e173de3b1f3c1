package cli

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/homemark"
)

// openHome opens the home (or restore's --target) once for the whole
// command; every package below works beneath it and never opens it
// again by its path. create makes a home that does not exist yet (a
// first boot); missingOK (a dry run, which creates nothing) gives a
// missing one, which holds nothing, instead of an error. The caller
// closes it.
func openHome(path string, create, missingOK bool) (*homefs.Home, error) {
	err := homemark.Check(path, create)
	if missingOK && errors.Is(err, fs.ErrNotExist) {
		return homefs.Missing(path), nil
	}
	if err != nil {
		return nil, err
	}
	h, err := homefs.OpenHome(path)
	if err != nil {
		return nil, fmt.Errorf("open home %s: %w", path, errors.Unwrap(err))
	}
	return h, nil
}
