package archive

import "io/fs"

// tar and the kernel agree on these octal bits; fs.FileMode does not.
const (
	cISUID = 0o4000
	cISGID = 0o2000
	cISVTX = 0o1000
)

func modeBits(e *Entry) int64 {
	var m int64
	if e.Mode&fs.ModeSetuid != 0 {
		m |= cISUID
	}
	if e.Mode&fs.ModeSetgid != 0 {
		m |= cISGID
	}
	if e.Mode&fs.ModeSticky != 0 {
		m |= cISVTX
	}
	return m
}
