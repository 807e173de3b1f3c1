package snapshot_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/rs/zerolog"

	jk "github.com/homesnap/homesnap/internal/jenkins"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/restore"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/testhome"
)

func operatorSelection(t *testing.T) *selector.Selector {
	sel, err := selector.New(selector.Spec{Preset: "none", Include: jk.OperatorBackup.Include, Exclude: jk.OperatorBackup.Exclude})
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// TestImportAddsParentsAndSkipsWhatTheOperatorLeavesOut: an archive that
// lists files only (tar -c of file names, not directories) gets its
// directories, and paths the operator's backup never holds (a top-level
// job's config.xml, a workspace) are skipped, not imported.
func TestImportAddsParentsAndSkipsWhatTheOperatorLeavesOut(t *testing.T) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for name, body := range map[string]string{
		"./jobs/a/builds/1/log":      "log",
		"jobs/a/config.xml":          "<project/>",
		"jobs/a/workspace/src.c":     "int main;",
		"jobs/f/jobs/b/config.xml":   "<nested/>",
		"jobs/f/jobs/b/nextBuildNum": "2",
	} {
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o640, Uid: 1000, Gid: 1000, Size: int64(len(body)), ModTime: time.Unix(1.7e9, 0)})
		io.WriteString(tw, body)
	}
	tw.Close()
	enc, _ := zstd.NewWriter(nil)
	st := snaptest.NewStore(t)
	res, err := snapshot.Import(context.Background(), snapshot.ImportOptions{
		Source: bytes.NewReader(enc.EncodeAll(raw.Bytes(), nil)), Name: "1.tar.zstd", Store: st,
		Root: jk.OperatorBackupRoot, Selection: operatorSelection(t), Log: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped != 2 || res.Totals.Files != 3 {
		t.Errorf("skipped %d (want 2: the top-level config.xml and the workspace file; first %q), files %d (want 3)", res.Skipped, res.FirstSkip, res.Totals.Files)
	}
	home := filepath.Join(t.TempDir(), "home")
	if _, err := restore.Restore(context.Background(), restore.Options{Home: testhome.Open(t, home), Store: st, Log: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]bool{
		"jobs/a/builds/1/log": true, "jobs/f/jobs/b/config.xml": true, "jobs/f/jobs/b/nextBuildNum": true,
		"jobs/a/config.xml": false, "jobs/a/workspace": false,
	} {
		fi, err := os.Lstat(filepath.Join(home, rel))
		if (err == nil) != want {
			t.Errorf("%s: restored %v, want %v", rel, err == nil, want)
		}
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() != 0o640 {
			t.Errorf("%s: mode %v, want the archive's 0640", rel, fi.Mode())
		}
	}
	for _, dir := range []string{"jobs", "jobs/a/builds/1", "jobs/f/jobs/b"} {
		if fi, err := os.Stat(filepath.Join(home, dir)); err != nil || !fi.IsDir() {
			t.Errorf("%s: the directory the archive did not list is missing: %v", dir, err)
		}
	}
	if res.Synthesized == 0 {
		t.Error("no parent directory was added")
	}
	m, err := repo.OpenManifest(context.Background(), st, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := m.Header.Selection; got.Preset != "none" || len(got.Include) != 1 || got.Include[0] != "jobs" {
		t.Errorf("recorded selection %+v: want the operator backup's, so a restore touches nothing else", got)
	}
}
