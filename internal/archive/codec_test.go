package archive

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

var awkward = []string{
	"plain", "jobs/déploiement-生产/😀", `quote"back\slash`, "tab\tnew\nline\r", "\x01\x1f\x7f",
	"</script>&<>", "\u2028\u2029", "a/b c/d", string([]byte{0xff, 0xfe, 'x'}), "\xed\xa0\x80", // invalid UTF-8
}

func randomEntry(rng *rand.Rand) *Entry {
	e := &Entry{
		Path: awkward[rng.IntN(len(awkward))], Type: []Type{TypeFile, TypeDir, TypeSymlink}[rng.IntN(3)],
		Mode: 0o7777 & 0o1755, UID: rng.IntN(70000), GID: rng.IntN(70000),
		Size: rng.Int64N(1 << 40), MTime: rng.Int64() - 1<<62, CTime: rng.Int64(), Inode: rng.Uint64(),
		Changed: rng.IntN(2) == 0, Implied: rng.IntN(2) == 0,
		Offset: rng.Int64N(1 << 40), Length: rng.Int64N(1 << 30),
	}
	if rng.IntN(2) == 0 {
		e.Link = awkward[rng.IntN(len(awkward))]
	}
	if rng.IntN(2) == 0 {
		e.Hash = new(Hash)
		for i := range e.Hash {
			e.Hash[i] = byte(rng.Uint32())
		}
		e.Archive = "20261202T111400.000Z-a1b2c3"
	}
	return e
}

func TestEntryCodecRoundTripsAnyBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 5000; i++ {
		e := randomEntry(rng)
		line := appendEntry(nil, e)
		var got Entry
		if err := parseEntry(line, &got, nil); err != nil {
			t.Fatalf("parse %s: %v", line, err)
		}
		if !reflect.DeepEqual(*e, got) {
			t.Fatalf("round trip:\n%+v\n%+v\n%s", *e, got, line)
		}
		if !json.Valid(line) {
			t.Fatalf("not valid JSON: %s", line)
		}
	}
}

// The lines are plain JSON: encoding/json reads what we write and we read
// what it writes.
func TestEntryCodecAgreesWithEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for i := 0; i < 2000; i++ {
		e := randomEntry(rng)
		e.Path, e.Link = "jobs/é\"\\\t\x01😀", "../x\n" // valid UTF-8 only
		var viaStd Entry
		if err := json.Unmarshal(appendEntry(nil, e), &viaStd); err != nil || !reflect.DeepEqual(*e, viaStd) {
			t.Fatalf("encoding/json reads our line differently: %v\n%+v\n%+v", err, *e, viaStd)
		}
		std, _ := json.Marshal(e)
		var viaUs Entry
		if err := parseEntry(std, &viaUs, nil); err != nil || !reflect.DeepEqual(*e, viaUs) {
			t.Fatalf("we read encoding/json's line differently: %v\n%s", err, std)
		}
	}
}

func FuzzParseEntry(f *testing.F) {
	f.Add([]byte(`{"path":"a","type":"f","mode":420,"uid":0,"gid":0,"mtime":1,"sha256":"` + string(make([]byte, 0)) + `"}`))
	f.Add(appendEntry(nil, &Entry{Path: "x\ny", Type: TypeSymlink, Link: "\xff"}))
	f.Fuzz(func(t *testing.T, line []byte) {
		var e Entry
		if parseEntry(line, &e, nil) != nil {
			return
		}
		var again Entry
		if err := parseEntry(appendEntry(nil, &e), &again, nil); err != nil || !reflect.DeepEqual(e, again) {
			t.Fatalf("re-encoding changes the entry: %v\n%+v\n%+v", err, e, again)
		}
	})
}

// The numbers are read in place: exactly what strconv accepts in base 10.
func TestEntryCodecNumbersAsStrconv(t *testing.T) {
	for _, n := range []string{"0", "-0", "007", "1", "-1", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
		"-9223372036854775809", "18446744073709551615", "18446744073709551616", "99999999999999999999", "-", "--1", "1-2", "-18446744073709551615"} {
		line := []byte(`{"path":"a","type":"file","size":` + n + `,"ino":` + strings.TrimPrefix(n, "-") + `}`)
		var e Entry
		err := parseEntry(line, &e, nil)
		want, werr := strconv.ParseInt(n, 10, 64)
		wantIno, ierr := strconv.ParseUint(strings.TrimPrefix(n, "-"), 10, 64)
		if (err == nil) != (werr == nil && ierr == nil) || err == nil && (e.Size != want || e.Inode != wantIno) {
			t.Errorf("%s: size %d ino %d err %v; strconv: %d %v, %d %v", n, e.Size, e.Inode, err, want, werr, wantIno, ierr)
		}
		if _, err := (&parser{b: []byte(n)}).uint(); (err == nil) != (func() bool { _, e := strconv.ParseUint(n, 10, 64); return e == nil })() {
			t.Errorf("uint %s: %v", n, err)
		}
	}
}

// A manifest names few archives: each ID is one string, however many
// lines name it.
func TestEntryCodecInternsArchives(t *testing.T) {
	archives := map[string]string{}
	line := appendEntry(nil, &Entry{Path: "a", Type: TypeFile, Archive: "20261202T111400.000Z-a1b2c3"})
	var a, b Entry
	if parseEntry(line, &a, archives) != nil || parseEntry(line, &b, archives) != nil {
		t.Fatal("parse failed")
	}
	if a.Archive != "20261202T111400.000Z-a1b2c3" || unsafe.StringData(a.Archive) != unsafe.StringData(b.Archive) {
		t.Fatalf("archive %q and %q are not one string", a.Archive, b.Archive)
	}
}
