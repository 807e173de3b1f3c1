//go:build !linux

package gen

import "time"

// lchtimes is a no-op where the standard library offers no lutimes: symlink
// mtimes then depend on creation time and are not reproducible.
func lchtimes(string, time.Time) error { return nil }
