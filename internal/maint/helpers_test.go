package maint

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/restore"
	"github.com/homesnap/homesnap/internal/store"
)

// restoreInto makes home snapshot id (empty: the head) of st, whatever it
// held, and leaves no mark: home then holds exactly the snapshot's tree,
// for comparing with what was snapshotted. (A restore into a home with
// data needs Force; what it displaces stays in the home.)
func restoreInto(home string, st store.Store, id string) error {
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	h, err := homefs.OpenHome(home)
	if err != nil {
		return err
	}
	defer h.Close()
	if _, err := restore.Restore(context.Background(), restore.Options{Home: h, Store: st, Snapshot: id, Force: true, Log: zerolog.Nop()}); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(home, homemark.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
