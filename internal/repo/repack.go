package repo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/homesnap/homesnap/internal/store"
)

// RepackNote records one repack: the archives whose live files were copied
// into archive ID, and when. It is written before the new archive, so that
// prune knows which archives a repack replaced and keeps them for a grace
// period after Time: a restore that opened a manifest before the repack
// rewrote it still reads them. It names only archive IDs, so it stays
// plain in an encrypted store.
type RepackNote struct {
	ID       string    `json:"id"` // the new archive's ID
	Time     time.Time `json:"time"`
	Replaced []string  `json:"replaced"`
}

// RepackKey is where a repack's note lives.
func RepackKey(id string) string { return "repacks/" + id + ".json" }

// RepackPrefix is the prefix of every repack note.
const RepackPrefix = "repacks/"

// WriteRepackNote stores a repack's note.
func WriteRepackNote(ctx context.Context, s store.Store, n *RepackNote) error {
	if err := CheckID(n.ID); err != nil {
		return err
	}
	data, _ := json.Marshal(n)
	if err := s.Put(ctx, RepackKey(n.ID), strings.NewReader(string(data))); err != nil {
		return fmt.Errorf("write repack note %s: %w", Name(s, RepackKey(n.ID)), err)
	}
	return nil
}

// LoadRepackNotes reads every repack note; a damaged one is an error
// naming it, since prune must not guess which archives it protects.
func LoadRepackNotes(ctx context.Context, s store.Store) ([]*RepackNote, error) {
	var keys []string
	if err := s.List(ctx, RepackPrefix, func(o store.Object) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		return nil, err
	}
	var notes []*RepackNote
	for _, key := range keys {
		data, _, err := s.Load(ctx, key)
		if errors.Is(err, store.ErrNotExist) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		var n RepackNote
		if err := json.Unmarshal(data, &n); err != nil || CheckID(n.ID) != nil || RepackKey(n.ID) != key {
			return nil, fmt.Errorf("%s is corrupt (%s): delete it once no restore started before it was written is still running", Name(s, key), excerpt(data))
		}
		notes = append(notes, &n)
	}
	return notes, nil
}
