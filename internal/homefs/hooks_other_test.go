//go:build !linux

package homefs

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The Linux paths' test hooks, which the shared tests set: there is
// nothing to switch here.
var (
	noOpenat2                           atomic.Bool
	openat2Errno                        unix.Errno
	renameNoReplaceUnsupported, noOPath bool
)
