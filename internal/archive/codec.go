package archive

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The manifest's entry lines are encoded and decoded by hand: they are the
// hot path of a no-change snapshot (one decode and one encode per path) and
// of loading a restore plan, where encoding/json's reflection costs several
// times more. The lines stay plain JSON that any JSON tool reads. Paths and
// link targets that are not valid UTF-8 (Linux allows any bytes) cannot be
// JSON strings without loss, so they are written base64-encoded under
// "path_b64" / "link_b64" instead.

// appendEntry appends e as one JSON line.
func appendEntry(b []byte, e *Entry) []byte {
	b = appendBytesField(b, `{"path`, e.Path)
	b = append(b, `,"type":"`...)
	b = append(b, e.Type...)
	b = append(b, `","mode":`...)
	b = strconv.AppendUint(b, uint64(e.Mode), 10)
	b = appendInt(b, `,"uid":`, int64(e.UID))
	b = appendInt(b, `,"gid":`, int64(e.GID))
	if e.Size != 0 {
		b = appendInt(b, `,"size":`, e.Size)
	}
	b = appendInt(b, `,"mtime":`, e.MTime)
	if e.Link != "" {
		b = appendBytesField(b, `,"link`, e.Link)
	}
	if e.Hash != nil {
		b = append(b, `,"sha256":"`...)
		b = hex.AppendEncode(b, e.Hash[:])
		b = append(b, '"')
	}
	if e.CTime != 0 {
		b = appendInt(b, `,"ctime":`, e.CTime)
	}
	if e.Inode != 0 {
		b = append(b, `,"ino":`...)
		b = strconv.AppendUint(b, e.Inode, 10)
	}
	if e.Changed {
		b = append(b, `,"changed_while_read":true`...)
	}
	if e.Implied {
		b = append(b, `,"implied":true`...)
	}
	if e.Archive != "" {
		b = append(b, `,"archive":`...)
		b = appendString(b, e.Archive)
	}
	if e.Offset != 0 {
		b = appendInt(b, `,"offset":`, e.Offset)
	}
	if e.Length != 0 {
		b = appendInt(b, `,"length":`, e.Length)
	}
	return append(b, "}\n"...)
}

// appendDeletion appends a delta manifest's deletion marker for path.
func appendDeletion(b []byte, path string) []byte {
	b = appendBytesField(b, `{"path`, path)
	b = append(b, `,"type":"`...)
	b = append(b, TypeDeleted...)
	return append(b, "\"}\n"...)
}

func appendInt(b []byte, key string, v int64) []byte {
	return strconv.AppendInt(append(b, key...), v, 10)
}

// appendBytesField writes `<prefix>":"s"`, or `<prefix>_b64":"..."` when s
// is not valid UTF-8.
func appendBytesField(b []byte, prefix, s string) []byte {
	b = append(b, prefix...)
	if utf8.ValidString(s) {
		b = append(b, `":`...)
		return appendString(b, s)
	}
	b = append(b, `_b64":"`...)
	b = base64.StdEncoding.AppendEncode(b, []byte(s))
	return append(b, '"')
}

// appendString appends s (valid UTF-8) as a JSON string.
func appendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

var errSyntax = errors.New("malformed entry")

// parseEntry decodes one entry line written by appendEntry (or by any JSON
// encoder producing the same object). Unknown keys are skipped so that
// newer writers can add fields. archives, when set, interns archive IDs
// (a manifest names few archives). Only the path, and a new archive ID or
// link target, are allocated: keys, types, numbers and hashes are read in
// place, as a manifest of a million lines is decoded on every snapshot.
func parseEntry(line []byte, e *Entry, archives map[string]string) error {
	p := parser{b: line, archives: archives}
	p.space()
	if !p.eat('{') {
		return errSyntax
	}
	p.space()
	if p.eat('}') {
		return nil
	}
	for {
		key, err := p.raw()
		if err != nil {
			return err
		}
		p.space()
		if !p.eat(':') {
			return errSyntax
		}
		p.space()
		if err := p.field(key, e); err != nil {
			return fmt.Errorf("field %q: %w", key, err)
		}
		p.space()
		if p.eat('}') {
			return nil
		}
		if !p.eat(',') {
			return errSyntax
		}
		p.space()
	}
}

type parser struct {
	b        []byte
	i        int
	archives map[string]string // interned archive IDs, or nil
}

func (p *parser) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *parser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *parser) field(key []byte, e *Entry) error {
	var err error
	switch string(key) {
	case "path":
		e.Path, err = p.str()
	case "path_b64":
		e.Path, err = p.b64()
	case "type":
		var t []byte
		t, err = p.raw()
		e.Type = typeOf(t)
	case "mode":
		var v uint64
		v, err = p.uint()
		e.Mode = fs.FileMode(v)
	case "uid":
		e.UID, err = p.intAs()
	case "gid":
		e.GID, err = p.intAs()
	case "size":
		e.Size, err = p.int()
	case "mtime":
		e.MTime, err = p.int()
	case "link":
		e.Link, err = p.str()
	case "link_b64":
		e.Link, err = p.b64()
	case "sha256":
		var s []byte
		if s, err = p.raw(); err == nil {
			e.Hash = new(Hash)
			err = e.Hash.UnmarshalText(s)
		}
	case "ctime":
		e.CTime, err = p.int()
	case "ino":
		e.Inode, err = p.uint()
	case "changed_while_read":
		e.Changed, err = p.bool()
	case "implied":
		e.Implied, err = p.bool()
	case "archive":
		var a []byte
		if a, err = p.raw(); err == nil {
			e.Archive = p.intern(a)
		}
	case "offset":
		e.Offset, err = p.int()
	case "length":
		e.Length, err = p.int()
	default:
		err = p.skip()
	}
	return err
}

// typeOf returns the Type named t, without allocating for the known ones.
func typeOf(t []byte) Type {
	for _, known := range []Type{TypeFile, TypeDir, TypeSymlink, TypeDeleted} {
		if string(t) == string(known) {
			return known
		}
	}
	return Type(t)
}

// intern returns a as a string, the same one for every line that names it.
func (p *parser) intern(a []byte) string {
	if id, ok := p.archives[string(a)]; ok {
		return id
	}
	id := string(a)
	if p.archives != nil && id != "" {
		p.archives[id] = id
	}
	return id
}

func (p *parser) number() ([]byte, error) {
	start := p.i
	for p.i < len(p.b) && (p.b[p.i] == '-' || p.b[p.i] >= '0' && p.b[p.i] <= '9') {
		p.i++
	}
	if p.i == start {
		return nil, errSyntax
	}
	return p.b[start:p.i], nil
}

func (p *parser) int() (int64, error) {
	n, err := p.number()
	if err != nil {
		return 0, err
	}
	neg := n[0] == '-'
	if neg {
		n = n[1:]
	}
	v, ok := decimal(n)
	switch {
	case !ok || v > 1<<63 || v == 1<<63 && !neg:
		return 0, errNumber
	case neg:
		return -int64(v), nil // 1<<63 wraps to the smallest int64, as meant
	}
	return int64(v), nil
}

func (p *parser) intAs() (int, error) {
	v, err := p.int()
	return int(v), err
}

func (p *parser) uint() (uint64, error) {
	n, err := p.number()
	if err != nil {
		return 0, err
	}
	v, ok := decimal(n)
	if !ok {
		return 0, errNumber
	}
	return v, nil
}

var errNumber = errors.New("not a number in range")

// decimal parses the unsigned decimal digits n; false when n is empty,
// holds anything else or overflows 64 bits.
func decimal(n []byte) (uint64, bool) {
	if len(n) == 0 {
		return 0, false
	}
	var v uint64
	for _, c := range n {
		d := uint64(c) - '0'
		if d > 9 || v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

func (p *parser) bool() (bool, error) {
	switch {
	case p.lit("true"):
		return true, nil
	case p.lit("false"):
		return false, nil
	}
	return false, errSyntax
}

func (p *parser) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

func (p *parser) b64() (string, error) {
	s, err := p.str()
	if err != nil {
		return "", err
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	return string(raw), err
}

// skip passes over a value of an unknown field.
func (p *parser) skip() error {
	switch {
	case p.i >= len(p.b):
		return errSyntax
	case p.b[p.i] == '"':
		_, err := p.str()
		return err
	case p.lit("true"), p.lit("false"), p.lit("null"):
		return nil
	}
	_, err := p.number()
	return err
}

// raw returns a JSON string's bytes, in place when it has no escapes (keys,
// types, hashes and archive IDs never have any). They are valid until the
// line is.
func (p *parser) raw() ([]byte, error) {
	if p.i < len(p.b) && p.b[p.i] == '"' {
		end := p.i + 1
		for end < len(p.b) && p.b[end] != '"' && p.b[end] != '\\' {
			end++
		}
		if end < len(p.b) && p.b[end] == '"' {
			s := p.b[p.i+1 : end]
			p.i = end + 1
			return s, nil
		}
	}
	s, err := p.str()
	return []byte(s), err
}

// str decodes a JSON string, handling every escape JSON allows.
func (p *parser) str() (string, error) {
	if !p.eat('"') {
		return "", errSyntax
	}
	start := p.i
	for p.i < len(p.b) && p.b[p.i] != '"' && p.b[p.i] != '\\' {
		p.i++
	}
	if p.i < len(p.b) && p.b[p.i] == '"' { // no escapes: the common case
		s := string(p.b[start:p.i])
		p.i++
		return s, nil
	}
	buf := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		p.i++
		switch c {
		case '"':
			return string(buf), nil
		case '\\':
			if p.i >= len(p.b) {
				return "", errSyntax
			}
			esc := p.b[p.i]
			p.i++
			switch esc {
			case '"', '\\', '/':
				buf = append(buf, esc)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if p.lit(`\u`) {
						if r2, err = p.hex4(); err != nil {
							return "", err
						}
					}
					r = utf16.DecodeRune(r, r2)
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return "", errSyntax
			}
		default:
			buf = append(buf, c)
		}
	}
	return "", errSyntax
}

func (p *parser) hex4() (rune, error) {
	if len(p.b)-p.i < 4 {
		return 0, errSyntax
	}
	v, err := strconv.ParseUint(string(p.b[p.i:p.i+4]), 16, 32)
	if err != nil {
		return 0, errSyntax
	}
	p.i += 4
	return rune(v), nil
}
