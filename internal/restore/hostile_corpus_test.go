package restore

// The hostile-store corpus: stores crafted by someone with write access to
// the bucket (or damaged by accident), in testdata/hostile. Each case is a
// complete local store; TestHostileStores restores every one of them into
// the same small home and checks what the restore must do. The corpus is
// built by the code below, byte for byte reproducibly:
//
//	go test ./internal/restore -run TestHostileStores -update-hostile
//
// rewrites testdata/hostile (README.md included) from it, and
// TestHostileCorpusIsReproducible checks the committed files match.

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/repo"
)

const corpusID = "20260101T000000.000Z-c0ffee"

var corpusTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// hostileCase is one store of the corpus. want is a part of the error the
// restore must fail with, leaving the home as it was; "" means the restore
// succeeds (and check, if set, inspects the home).
type hostileCase struct {
	name, about string
	want        string
	build       func(b *corpusStore) error
}

// cfile is a path of a crafted snapshot.
type cfile struct {
	path string
	typ  archive.Type
	mode fs.FileMode
	data string
	uid  int
}

func cdir(p string) cfile { return cfile{path: p, typ: archive.TypeDir, mode: 0o755} }
func cfil(p, data string) cfile {
	return cfile{path: p, typ: archive.TypeFile, mode: 0o644, data: data}
}
func withMode(f cfile, m fs.FileMode) cfile { f.mode = m; return f }

// baseSnapshot is an honest jenkins snapshot of a tiny home.
func baseSnapshot() []cfile {
	return []cfile{
		cdir("jobs"), cdir("jobs/a"), cfil("jobs/a/config.xml", "<snap/>\n"),
		cdir("nodes"), cdir("nodes/n"), cfil("nodes/n/config.xml", "<slave>n</slave>\n"),
		withMode(cdir("secrets"), 0o700), withMode(cfil("secrets/master.key", "0123456789abcdef"), 0o600),
	}
}

// corpusStore writes one case's store.
type corpusStore struct {
	dir string
}

func (b *corpusStore) put(key string, data []byte) error {
	p := filepath.Join(b.dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

// snapshot writes an honest archive of files and a manifest whose header
// selects preset, then lets edit change the entries before they are
// written (in the order edit leaves them).
func (b *corpusStore) snapshot(preset string, files []cfile, edit func([]*archive.Entry) []*archive.Entry) error {
	slices.SortFunc(files, func(x, y cfile) int { return archive.ComparePaths(x.path, y.path) })
	var arch bytes.Buffer
	c, err := archive.NewCompressor(zstd.SpeedFastest, 1)
	if err != nil {
		return err
	}
	var entries []*archive.Entry
	fw := archive.NewFrameWriter(c, func(frame []byte) error { arch.Write(frame); return nil })
	for _, f := range files {
		e := &archive.Entry{Path: f.path, Type: f.typ, Mode: f.mode, UID: f.uid, GID: f.uid, MTime: corpusTime.UnixNano()}
		if f.typ == archive.TypeFile {
			sum := archive.Hash(sha256.Sum256([]byte(f.data)))
			e.Hash, e.Size = &sum, int64(len(f.data))
		}
		if e.HasData() {
			if err := fw.Cut(); err != nil {
				return err
			}
			e.Archive, e.Offset = corpusID, int64(arch.Len())
			if err := fw.WriteHeader(e); err != nil {
				return err
			}
			if _, err := fw.Write([]byte(f.data)); err != nil {
				return err
			}
			if err := fw.Cut(); err != nil {
				return err
			}
			e.Length = int64(arch.Len()) - e.Offset
		}
		entries = append(entries, e)
	}
	arch.Write(c.EndFrame())
	if edit != nil {
		entries = edit(entries)
	}
	if err := b.put(repo.ArchiveKey(corpusID), arch.Bytes()); err != nil {
		return err
	}
	var m bytes.Buffer
	w, err := archive.NewManifestWriter(&m, archive.Header{ID: corpusID, Created: corpusTime, Selection: archive.Selection{Preset: preset}})
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := w.ForceWrite(e); err != nil {
			return err
		}
	}
	if _, err := w.Close(0, 0); err != nil {
		return err
	}
	return b.manifest(m.Bytes())
}

// manifest stores a manifest as it is, plus the head and marker.
func (b *corpusStore) manifest(data []byte) error {
	head, _ := json.Marshal(repo.Head{Snapshot: corpusID, Time: corpusTime})
	if err := b.put(repo.HeadKey, head); err != nil {
		return err
	}
	if err := b.put(repo.MarkerKey, []byte(`{"homesnap":1}`)); err != nil {
		return err
	}
	return b.put(repo.ManifestKey(corpusID), data)
}

// zstdStream compresses data as one stream with the given window.
// honestManifestEdited stores the base snapshot, then rewrites its
// manifest's uncompressed lines with edit.
func (b *corpusStore) honestManifestEdited(edit func(plain []byte) ([]byte, error)) error {
	if err := b.snapshot("jenkins", baseSnapshot(), nil); err != nil {
		return err
	}
	key := filepath.Join(b.dir, filepath.FromSlash(repo.ManifestKey(corpusID)))
	data, err := os.ReadFile(key)
	if err != nil {
		return err
	}
	zr, _ := zstd.NewReader(bytes.NewReader(data))
	defer zr.Close()
	plain, err := io.ReadAll(zr)
	if err != nil {
		return err
	}
	if plain, err = edit(plain); err != nil {
		return err
	}
	out, err := zstdStream(bytes.NewReader(plain), 1<<20)
	if err != nil {
		return err
	}
	return os.WriteFile(key, out, 0o644)
}

func zstdStream(data io.Reader, window int) ([]byte, error) {
	var out bytes.Buffer
	zw, err := zstd.NewWriter(&out, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithWindowSize(window))
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(zw, data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func find(es []*archive.Entry, p string) *archive.Entry {
	for _, e := range es {
		if e.Path == p {
			return e
		}
	}
	panic("no entry " + p)
}

var hostileCases = []hostileCase{
	{name: "outside-own-selection", want: "outside the snapshot's own selection",
		about: "A jenkins snapshot whose manifest also lists plugins/evil.jpi. The manifest contradicts its own header: refused, nothing written.",
		build: func(b *corpusStore) error {
			return b.snapshot("jenkins", append(baseSnapshot(), cdir("plugins"), cfil("plugins/evil.jpi", "")), nil)
		}},
	{name: "plugins-becomes-file",
		about: "The header claims the `all` preset and the manifest makes `plugins` a file. The restore's own (jenkins) selection does not select plugins: the entry is skipped, plugins/ stays.",
		build: func(b *corpusStore) error {
			return b.snapshot("all", append(baseSnapshot(), cfil("plugins", "x")), nil)
		}},
	{name: "workspace-becomes-file",
		about: "Header `all`, and a file at jobs/a/workspace. Workspaces are not selected locally: skipped, the workspace stays.",
		build: func(b *corpusStore) error {
			return b.snapshot("all", append(baseSnapshot(), cfil("jobs/a/workspace", "x")), nil)
		}},
	{name: "header-widens-selection",
		about: "An honest jenkins snapshot whose header was changed to the `all` preset. What the restore may remove comes from its own selection: caches/, plugins/, war/ and config.xml stay.",
		build: func(b *corpusStore) error { return b.snapshot("all", baseSnapshot(), nil) }},
	{name: "reserved-name", want: "reserved namespace",
		about: "An entry .homesnap-restore-x at the home root, in homesnap's own namespace: refused.",
		build: func(b *corpusStore) error {
			return b.snapshot("all", append(baseSnapshot(), cfil(".homesnap-restore-x", "x")), nil)
		}},
	{name: "uid-wraps-to-root", want: "outside the valid range",
		about: "jobs/a/config.xml owned by uid 2^32 with mode 4755: as root, chown would wrap it to uid 0. Refused.",
		build: func(b *corpusStore) error {
			return b.snapshot("jenkins", baseSnapshot(), func(es []*archive.Entry) []*archive.Entry {
				e := find(es, "jobs/a/config.xml")
				e.UID, e.Mode = 1<<32, 0o755|fs.ModeSetuid
				return es
			})
		}},
	{name: "setuid-file",
		about: "jobs/a/run.sh with mode 4755 (and a setgid directory nodes/n). Restored as 0755: setuid and setgid are dropped from files with a warning; the setgid directory keeps its bit.",
		build: func(b *corpusStore) error {
			files := baseSnapshot()
			files[4] = withMode(cdir("nodes/n"), 0o755|fs.ModeSetgid)
			return b.snapshot("jenkins", append(files, withMode(cfil("jobs/a/run.sh", "#!/bin/sh\n"), 0o755|fs.ModeSetuid)), nil)
		}},
	{name: "empty-manifest", want: "would remove most",
		about: "A valid manifest with no entries and a correct trailer: it would remove every selected path of the home. Refused without --force.",
		build: func(b *corpusStore) error { return b.snapshot("jenkins", nil, nil) }},
	{name: "dir-becomes-file-over-workspace", want: "holding paths outside the selection",
		about: "jobs/a is a file in the snapshot, but in the home a directory holding an (unselected) workspace: replacing it would delete the workspace. Refused.",
		build: func(b *corpusStore) error {
			files := slices.DeleteFunc(baseSnapshot(), func(f cfile) bool { return strings.HasPrefix(f.path, "jobs/a") })
			return b.snapshot("jenkins", append(files, cfil("jobs/a", "x")), nil)
		}},
	{name: "dot-dot", want: "unsafe path",
		about: "An entry jobs/../../escape: refused by the manifest reader.",
		build: func(b *corpusStore) error {
			return b.snapshot("jenkins", baseSnapshot(), func(es []*archive.Entry) []*archive.Entry {
				es[len(es)-1].Path = "jobs/../../escape"
				return es
			})
		}},
	{name: "through-symlink", want: "no parent directory entry",
		about: "jobs/l is a symlink to /etc and the manifest lists jobs/l/evil below it: writing it would follow the link. Refused.",
		build: func(b *corpusStore) error {
			return b.snapshot("jenkins", append(baseSnapshot(), cfile{path: "jobs/l", typ: archive.TypeSymlink, mode: 0o777}, cfil("jobs/l/evil", "")), func(es []*archive.Entry) []*archive.Entry {
				find(es, "jobs/l").Link = "/etc"
				return es
			})
		}},
	{name: "hard-link", want: "is type",
		about: "The archive holds jobs/a/config.xml as a hard link to /etc/passwd. Only regular files are taken from archives: refused.",
		build: func(b *corpusStore) error {
			if err := b.snapshot("jenkins", baseSnapshot(), nil); err != nil {
				return err
			}
			var raw bytes.Buffer
			tw := tar.NewWriter(&raw)
			tw.WriteHeader(&tar.Header{Name: "jobs/a/config.xml", Typeflag: tar.TypeLink, Linkname: "/etc/passwd", ModTime: corpusTime})
			tw.Close()
			arch, err := zstdStream(&raw, 1<<20)
			if err != nil {
				return err
			}
			if err := b.put(repo.ArchiveKey(corpusID), arch); err != nil {
				return err
			}
			var m bytes.Buffer
			w, _ := archive.NewManifestWriter(&m, archive.Header{ID: corpusID, Created: corpusTime, Selection: archive.Selection{Preset: "jenkins"}})
			for _, e := range []*archive.Entry{{Path: "jobs", Type: archive.TypeDir, Mode: 0o755}, {Path: "jobs/a", Type: archive.TypeDir, Mode: 0o755}} {
				w.ForceWrite(e)
			}
			sum := archive.Hash(sha256.Sum256([]byte("<snap/>\n")))
			w.ForceWrite(&archive.Entry{Path: "jobs/a/config.xml", Type: archive.TypeFile, Mode: 0o644, Size: 8, Hash: &sum, Archive: corpusID, Length: int64(len(arch))})
			w.Close(0, 0)
			return b.manifest(m.Bytes())
		}},
	{name: "missing-archive", want: "is missing",
		about: "An honest manifest whose archive object is gone. Refused, naming the object.",
		build: func(b *corpusStore) error {
			if err := b.snapshot("jenkins", baseSnapshot(), nil); err != nil {
				return err
			}
			return os.Remove(filepath.Join(b.dir, filepath.FromSlash(repo.ArchiveKey(corpusID))))
		}},
	{name: "wrong-hash", want: "does not match",
		about: "jobs/a/config.xml's recorded SHA-256 is not its content's. Refused after staging, before any move.",
		build: func(b *corpusStore) error {
			return b.snapshot("jenkins", baseSnapshot(), func(es []*archive.Entry) []*archive.Entry {
				find(es, "jobs/a/config.xml").Hash[0] ^= 1
				return es
			})
		}},
	{name: "truncated-manifest", want: "truncated",
		about: "A manifest cut after its first entries, without the trailer that proves it complete. Refused.",
		build: func(b *corpusStore) error {
			return b.honestManifestEdited(func(plain []byte) ([]byte, error) {
				return bytes.Join(bytes.SplitAfter(plain, []byte("\n"))[:4], nil), nil
			})
		}},
	{name: "span-lies", want: "does not sum up its entries",
		about: "An honest manifest whose span line claims fewer bytes than its entries hold (a snapshot passing over it would record wrong totals). Every reader that decodes a span checks it: refused.",
		build: func(b *corpusStore) error {
			return b.honestManifestEdited(func(plain []byte) ([]byte, error) {
				lied := regexp.MustCompile(`("span":\{"entries":\d+,"files":\d+,"bytes":)\d+`).ReplaceAll(plain, []byte("${1}1"))
				if bytes.Equal(lied, plain) {
					return nil, errors.New("span-lies: the manifest has no span line")
				}
				return lied, nil
			})
		}},
	{name: "skip-bomb", want: "decodes to more than",
		about: "The range of jobs/a/config.xml holds, before it, a tar entry of 256 MiB of zeros (a few KiB compressed). A range may decode only what its entries account for: refused without decoding it all.",
		build: func(b *corpusStore) error {
			if err := b.snapshot("jenkins", baseSnapshot(), nil); err != nil {
				return err
			}
			var raw bytes.Buffer
			tw := tar.NewWriter(&raw)
			const junk = 256 << 20
			tw.WriteHeader(&tar.Header{Name: "jobs/a/junk", Typeflag: tar.TypeReg, Size: junk, Mode: 0o644, ModTime: corpusTime})
			pr, pw := io.Pipe()
			go func() {
				tw2 := tar.NewWriter(pw)
				pw.Write(raw.Bytes())
				io.CopyN(pw, zeros{}, junk)
				data := "<snap/>\n"
				tw2.WriteHeader(&tar.Header{Name: "jobs/a/config.xml", Typeflag: tar.TypeReg, Size: int64(len(data)), Mode: 0o644, ModTime: corpusTime})
				tw2.Write([]byte(data))
				tw2.Close()
				pw.Close()
			}()
			arch, err := zstdStream(pr, 1<<20)
			if err != nil {
				return err
			}
			if err := b.put(repo.ArchiveKey(corpusID), arch); err != nil {
				return err
			}
			var m bytes.Buffer
			w, _ := archive.NewManifestWriter(&m, archive.Header{ID: corpusID, Created: corpusTime, Selection: archive.Selection{Preset: "jenkins"}})
			for _, f := range baseSnapshot() {
				if f.path == "secrets/master.key" || f.path == "nodes/n/config.xml" {
					continue
				}
				e := &archive.Entry{Path: f.path, Type: f.typ, Mode: f.mode, MTime: corpusTime.UnixNano()}
				if f.typ == archive.TypeFile {
					sum := archive.Hash(sha256.Sum256([]byte(f.data)))
					e.Hash, e.Size, e.Archive, e.Length = &sum, int64(len(f.data)), corpusID, int64(len(arch))
				}
				w.ForceWrite(e)
			}
			w.Close(0, 0)
			return b.manifest(m.Bytes())
		}},
	{name: "manifest-line-bomb", want: "longer than",
		about: "After the header, a manifest line of 256 MiB without a newline (a few KiB compressed). Lines are bounded (1 MiB): refused without buffering it.",
		build: func(b *corpusStore) error {
			hdr, _ := json.Marshal(archive.Header{Format: archive.FormatVersion, ID: corpusID, Created: corpusTime, Selection: archive.Selection{Preset: "jenkins"}})
			data, err := zstdStream(io.MultiReader(bytes.NewReader(append(hdr, '\n')), io.LimitReader(letters{}, 256<<20)), 1<<20)
			if err != nil {
				return err
			}
			return b.manifest(data)
		}},
	{name: "manifest-window-bomb", want: "window size exceeded",
		about: "An honest (empty) manifest followed by 65 MiB of blank lines, compressed with a 64 MiB zstd window (homesnap writes 8 MiB at most). The decoder's window is bounded: refused before it allocates.",
		build: func(b *corpusStore) error {
			var m bytes.Buffer
			w, _ := archive.NewManifestWriter(&m, archive.Header{ID: corpusID, Created: corpusTime, Selection: archive.Selection{Preset: "jenkins"}})
			w.Close(0, 0)
			zr, _ := zstd.NewReader(bytes.NewReader(m.Bytes()))
			defer zr.Close()
			data, err := zstdStream(io.MultiReader(zr, io.LimitReader(newlines{}, 65<<20)), 64<<20)
			if err != nil {
				return err
			}
			return b.manifest(data)
		}},
	{name: "overlapping-ranges", want: "starts inside",
		about: "nodes/n/config.xml claims to start in the middle of jobs/a/config.xml's bytes. Ranges never overlap in an honest archive: refused.",
		build: func(b *corpusStore) error {
			return b.snapshot("jenkins", baseSnapshot(), func(es []*archive.Entry) []*archive.Entry {
				a, n := find(es, "jobs/a/config.xml"), find(es, "nodes/n/config.xml")
				a.Length = n.Offset + n.Length - a.Offset
				n.Offset = a.Offset + 1
				return es
			})
		}},
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type newlines struct{}

func (newlines) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '\n'
	}
	return len(p), nil
}

type letters struct{}

func (letters) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// buildCorpus writes every case under dir, and the README.
func buildCorpus(dir string) error {
	var readme strings.Builder
	readme.WriteString("# Hostile stores\n\nStores crafted by someone with write access to the bucket, or damaged. Every restore change runs against all of them (`TestHostileStores` in internal/restore), restoring into a small home that holds jobs/a (with a workspace), jobs/b, nodes/, secrets/ and unselected plugins/, caches/, war/ and config.xml. Each directory is a local store (`--store testdata/hostile/NAME`); the manifests seed the manifest reader's fuzz target. Generated by `go test ./internal/restore -run TestHostileStores -update-hostile`; do not edit by hand.\n\n| case | what it is | what the restore must do |\n|---|---|---|\n")
	for _, c := range hostileCases {
		if err := c.build(&corpusStore{dir: filepath.Join(dir, c.name)}); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		must := "succeed"
		if c.want != "" {
			must = fmt.Sprintf("fail with %q, home unchanged", c.want)
		}
		fmt.Fprintf(&readme, "| %s | %s | %s |\n", c.name, c.about, must)
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(readme.String()), 0o644)
}
