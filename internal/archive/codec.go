package archive

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
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
// newer writers can add fields.
func parseEntry(line []byte, e *Entry) error {
	p := parser{b: line}
	p.space()
	if !p.eat('{') {
		return errSyntax
	}
	p.space()
	if p.eat('}') {
		return nil
	}
	for {
		key, err := p.str()
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
	b []byte
	i int
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

func (p *parser) field(key string, e *Entry) error {
	var err error
	switch key {
	case "path":
		e.Path, err = p.str()
	case "path_b64":
		e.Path, err = p.b64()
	case "type":
		var t string
		t, err = p.str()
		e.Type = Type(t)
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
		var s string
		if s, err = p.str(); err == nil {
			e.Hash = new(Hash)
			err = e.Hash.UnmarshalText([]byte(s))
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
		e.Archive, err = p.str()
	case "offset":
		e.Offset, err = p.int()
	case "length":
		e.Length, err = p.int()
	default:
		err = p.skip()
	}
	return err
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
	return strconv.ParseInt(string(n), 10, 64)
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
	return strconv.ParseUint(string(n), 10, 64)
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
