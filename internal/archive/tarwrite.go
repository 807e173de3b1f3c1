package archive

import (
	"archive/tar"
	"strings"
	"time"
)

// ustarBlock lays h out in blk exactly as archive/tar's writer does when
// it picks the ustar format, and reports false, leaving blk undefined, for
// any header it would write otherwise (pax records for long or non-ASCII
// names and link targets, numbers past their octal fields, owner names,
// ...), which the caller hands to archive/tar. That writer spent 1.6–1.9
// µs and six allocations a file (BenchmarkTarHeaderWrite); this a quarter
// of that and none. TestUSTARBlockIsArchiveTars and FuzzUSTARBlock hold
// its blocks to archive/tar's byte for byte, so archives are the same bytes.
func ustarBlock(blk *[blockSize]byte, h *tar.Header) bool {
	//lint:ignore SA1019 archive/tar still writes Xattrs as pax records: a header with them is not one ustar block
	xattrs := h.Xattrs != nil
	switch {
	case h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeDir && h.Typeflag != tar.TypeSymlink,
		h.Typeflag == tar.TypeReg && strings.HasSuffix(h.Name, "/"), // archive/tar refuses it
		h.Uname != "" || h.Gname != "" || h.Devmajor != 0 || h.Devminor != 0,
		h.Format != tar.FormatUnknown || h.PAXRecords != nil || xattrs,
		!h.AccessTime.IsZero() || !h.ChangeTime.IsZero(),
		!ustarASCII(h.Name) || !ustarASCII(h.Linkname) || len(h.Linkname) > 100:
		return false
	}
	*blk = [blockSize]byte{}
	name := h.Name
	if len(name) > 100 {
		prefix, suffix, ok := splitUSTARPath(name)
		if !ok {
			return false
		}
		copy(blk[345:500], prefix)
		name = suffix
	}
	copy(blk[0:100], name)
	copy(blk[157:257], h.Linkname)
	// archive/tar writes a header without a chosen format with its mtime
	// rounded to the second.
	mtime := h.ModTime.Round(time.Second).Unix()
	if !putOctal(blk[100:108], h.Mode) || !putOctal(blk[108:116], int64(h.Uid)) ||
		!putOctal(blk[116:124], int64(h.Gid)) || !putOctal(blk[124:136], h.Size) ||
		!putOctal(blk[136:148], mtime) {
		return false
	}
	blk[156] = h.Typeflag
	putOctal(blk[329:337], 0) // device major and minor
	putOctal(blk[337:345], 0)
	copy(blk[257:263], "ustar\x00")
	copy(blk[263:265], "00")
	sum := int64(8 * ' ') // the checksum field itself counts as spaces
	for _, c := range blk {
		sum += int64(c)
	}
	putOctal(blk[148:155], sum)
	blk[155] = ' '
	return true
}

// ustarASCII reports whether s fits a ustar field as archive/tar writes
// one: ASCII without NUL.
func ustarASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == 0 || c >= 0x80 {
			return false
		}
	}
	return true
}

// putOctal writes x as archive/tar does: octal digits with leading zeros
// and a NUL in the field's last byte. It reports false when x does not fit.
func putOctal(field []byte, x int64) bool {
	n := len(field) - 1
	if x < 0 || x >= 1<<(3*n) {
		return false
	}
	for i := n - 1; i >= 0; i-- {
		field[i] = byte('0' + x&7)
		x >>= 3
	}
	field[n] = 0
	return true
}

// splitUSTARPath splits a name longer than the name field into ustar's
// prefix and name at a slash, where archive/tar's writer would.
func splitUSTARPath(name string) (prefix, suffix string, ok bool) {
	length := len(name)
	if length > 156 {
		length = 156
	} else if name[length-1] == '/' {
		length--
	}
	i := strings.LastIndexByte(name[:length], '/')
	nlen := len(name) - i - 1 // the prefix, i bytes, fits: i < length
	if i <= 0 || nlen > 100 || nlen == 0 {
		return "", "", false
	}
	return name[:i], name[i+1:], true
}
