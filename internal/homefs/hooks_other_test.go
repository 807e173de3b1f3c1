//go:build !linux

package homefs

import "sync/atomic"

// The Linux paths' test hooks, which the shared tests set: there is
// nothing to switch here.
var (
	noOpenat2                                               atomic.Bool
	kernelLacksOpenat2, renameNoReplaceUnsupported, noOPath bool
)
