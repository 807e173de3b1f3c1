package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/store"
)

// Plan streams a snapshot's manifest and validates it on the way:
// paths must be safe (the manifest reader checks them), every path's
// parent must be a directory of the same snapshot, so no entry can be
// reached through a symlink or a file, and the entry filter decides what
// the restore applies. Only the current entry's ancestors are held in
// memory, never the whole tree.
type Plan struct {
	Filter *Filter // what the restore applies; its counts grow as entries are read
	s      store.Store
	id     string
	m      *archive.ChainReader
	dirs   []string // ancestors of the current entry
	n      int64
}

// OpenPlan opens a snapshot's manifest as a checked stream of the entries
// that sel (narrowed by include and exclude) lets through. layers, when
// given, is the chain the snapshot's record names (see repo.OpenManifest).
func OpenPlan(ctx context.Context, st store.Store, id string, sel *selector.Selector, include, exclude []string, layers ...string) (*Plan, error) {
	m, err := repo.OpenManifest(ctx, st, id, layers...)
	if err != nil {
		return nil, err
	}
	f, err := newFilter(sel, include, exclude, selector.Spec(m.Header.Selection))
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", repo.Name(st, repo.ManifestKey(id)), err)
	}
	return &Plan{s: st, id: id, m: m, Filter: f}, nil
}

func (p *Plan) Close() { p.m.Close() }

// Header is the manifest's header (ID, parent, the snapshot's selection).
func (p *Plan) Header() archive.Header { return p.m.Header }

// Next returns the next checked entry that the restore applies, or io.EOF
// after a complete manifest.
func (p *Plan) Next(ctx context.Context) (*archive.Entry, error) {
	for {
		e, apply, err := p.read(ctx)
		if err != nil || apply {
			return e, err
		}
	}
}

// All yields the entries Next returns, until io.EOF; an error is yielded
// once and ends it.
func (p *Plan) All(ctx context.Context) iter.Seq2[*archive.Entry, error] {
	return repo.Entries(func() (*archive.Entry, error) { return p.Next(ctx) })
}

func (p *Plan) corrupt(format string, args ...any) error {
	return fmt.Errorf("%s: %w manifest: %s", repo.Name(p.s, repo.ManifestKey(p.id)), archive.ErrCorrupt, fmt.Sprintf(format, args...))
}

func (p *Plan) read(ctx context.Context) (*archive.Entry, bool, error) {
	e, err := p.m.Next()
	if errors.Is(err, io.EOF) {
		return nil, false, io.EOF
	}
	if err != nil {
		return nil, false, err // it names the manifest layer at fault
	}
	parent := archive.Parent(e.Path)
	for len(p.dirs) > 0 && p.dirs[len(p.dirs)-1] != parent {
		p.dirs = p.dirs[:len(p.dirs)-1]
	}
	if parent != "" && len(p.dirs) == 0 {
		return nil, false, p.corrupt("%q has no parent directory entry (a path through a symlink or file is refused)", e.Path)
	}
	if e.Type == archive.TypeDir {
		p.dirs = append(p.dirs, e.Path)
	}
	if e.HasData() {
		if err := repo.CheckID(e.Archive); err != nil {
			return nil, false, p.corrupt("%q points at archive %q", e.Path, e.Archive)
		}
	}
	apply, err := p.Filter.check(e)
	if err != nil {
		return nil, false, p.corrupt("%v", err)
	}
	if p.n++; p.n%65536 == 0 {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
	}
	return e, apply, nil
}
