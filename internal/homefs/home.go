package homefs

import "path/filepath"

// Home is a Jenkins home opened once, by the command that works on it,
// and handed to every package below: they all work beneath Dir, so
// "beneath one descriptor" holds by construction, and none opens the
// home again by its path (internal/homepaths_test.go keeps it so). The
// command closes it; code below never does, and what needs a descriptor
// of its own (to close it, or to lock the home) takes Dir.Reopen.
type Home struct {
	// Dir is the home's descriptor: -1 for a home that does not exist
	// (see Missing).
	Dir Dir
	// Path is the configured path, for messages and logs only.
	Path string
}

// OpenHome opens the existing home at path (configuration, trusted; see
// Open).
func OpenHome(path string) (*Home, error) {
	d, err := Open(path)
	if err != nil {
		return nil, err
	}
	return &Home{Dir: d, Path: path}, nil
}

// Missing is a home that does not exist yet, for a dry run, which must
// create nothing: it holds nothing, and has no mark.
func Missing(path string) *Home { return &Home{Dir: -1, Path: path} }

// Exists reports whether h is an open home (false for nil and Missing).
func (h *Home) Exists() bool { return h != nil && h.Dir >= 0 }

// Close closes the home's descriptor; only the command that opened it
// calls it.
func (h *Home) Close() error {
	if !h.Exists() {
		return nil
	}
	err := h.Dir.Close()
	h.Dir = -1
	return err
}

// Join names rel, a slash-separated path in the home, for a message.
func (h *Home) Join(rel string) string {
	return filepath.Join(h.Path, filepath.FromSlash(rel))
}

// Reopen opens d again: a descriptor of its own, with its own offset and
// its own flock, which the caller closes. It is resolved beneath d, so it
// is the directory d is, even if its path now names another.
func (d Dir) Reopen() (Dir, error) { return d.OpenDir(".") }
