package snapshot_test

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/restore"
	"github.com/homesnap/homesnap/internal/store"
)

// restoreInto restores snapshot id (empty: the head) of st into home.
func restoreInto(home string, st store.Store, id string) error {
	_, err := restoreIntoWith(home, st, id, nil)
	return err
}

// restoreIntoWith restores with options adjusted by set.
func restoreIntoWith(home string, st store.Store, id string, set func(*restore.Options)) (*restore.Result, error) {
	o := restore.Options{Home: home, Store: st, Snapshot: id, Log: zerolog.Nop()}
	if set != nil {
		set(&o)
	}
	return restore.Restore(context.Background(), o)
}
