package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/storetest"
	"github.com/homesnap/homesnap/internal/testhome"
)

// backend is one object store the binaries are run against: its URL for a
// prefix, the environment its credentials come from, and how the test
// removes what it wrote.
type backend struct {
	name string
	// setup checks the server is there and returns the store URL for
	// prefix and the binaries' environment.
	setup func(t *testing.T, prefix string) (storeURL string, env []string)
}

// Small parts, so that the archive (well over 12 MiB) is a multipart,
// block or resumable upload of several pieces on every backend.
var backends = []backend{
	{"versitygw/s3", func(t *testing.T, prefix string) (string, []string) {
		ep := storetest.Server(t, "versitygw", "HOMESNAP_TEST_S3_ENDPOINT")
		removeS3AtEnd(t, ep, prefix)
		return s3URL(ep, prefix, "&part_size=5MiB"), s3Env()
	}},
	{"versitygw/minio", func(t *testing.T, prefix string) (string, []string) {
		ep := storetest.Server(t, "versitygw", "HOMESNAP_TEST_S3_ENDPOINT")
		removeS3AtEnd(t, ep, prefix)
		return fmt.Sprintf("minio://%s/%s/%s?secure=false&part_size=5MiB", hostOf(t, ep), testBucket, prefix), s3Env()
	}},
	{"seaweedfs/s3", func(t *testing.T, prefix string) (string, []string) {
		ep := storetest.Server(t, "SeaweedFS", "HOMESNAP_TEST_SEAWEED_ENDPOINT")
		removeS3AtEnd(t, ep, prefix)
		return s3URL(ep, prefix, "&part_size=5MiB&list_page_size=1"), s3Env()
	}},
	{"fake-gcs/gs", func(t *testing.T, prefix string) (string, []string) {
		host := storetest.Server(t, "fake-gcs-server", "STORAGE_EMULATOR_HOST")
		raw := fmt.Sprintf("gs://%s/%s?part_size=2MiB&list_page_size=1", testBucket, prefix)
		// The test process finds the emulator through the same variable.
		removeStoreAtEnd(t, func(ctx context.Context) (store.Store, error) {
			return store.Open(ctx, "gs://"+testBucket+"/"+prefix)
		})
		return raw, []string{"STORAGE_EMULATOR_HOST=" + host}
	}},
	{"azurite/azblob", func(t *testing.T, prefix string) (string, []string) {
		conn := storetest.Server(t, "Azurite", "HOMESNAP_TEST_AZURE_CONNECTION_STRING")
		removeAzureAtEnd(t, conn, prefix)
		return fmt.Sprintf("azblob://%s/%s?part_size=4MiB&list_page_size=1", testBucket, prefix),
			[]string{"AZURE_STORAGE_CONNECTION_STRING=" + conn, "AZURE_STORAGE_ACCOUNT=", "AZURE_STORAGE_KEY="}
	}},
}

// TestBackends is the user's story on every object store: snapshot a home,
// let Jenkins change it, snapshot again, list, and restore each snapshot
// into an empty directory with every attribute intact.
func TestBackends(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			prefix := storetest.Prefix(t)
			storeURL, env := b.setup(t, prefix)
			// A file of several frames and upload parts that does not
			// compress, on top of testhome's edge cases.
			home := buildHome(t, "jobs/test/builds/1/archive/big.bin", 13<<20)
			env = append(env, "HOMESNAP_STORE="+storeURL)

			id1 := ok(t, run(t, "snapshot", env, "--once", "--home", home, "--timeout", "2m"))
			want1 := selectedTree(t, home)
			testhome.Change(t, home)
			id2 := ok(t, run(t, "snapshot", env, "--once", "--home", home, "--timeout", "2m"))
			want2 := selectedTree(t, home)
			if id1 == "" || id2 == "" || id1 == id2 || strings.Contains(id1+id2, "\n") {
				t.Fatalf("snapshot IDs %q and %q", id1, id2)
			}
			// Nothing changed since: no third snapshot.
			if id := ok(t, run(t, "snapshot", env, "--once", "--home", home)); id != "" {
				t.Errorf("unchanged home: snapshot printed %q, want no new snapshot", id)
			}

			l := list(t, storeURL, env)
			if len(l.ids) != 2 || l.ids[0] != id1 || l.ids[1] != id2 || l.head != id2 {
				t.Fatalf("--list = %v, head %q; want [%s %s], head %s", l.ids, l.head, id1, id2, id2)
			}

			for _, c := range []struct {
				args []string
				want testhome.Tree
			}{
				{[]string{"--snapshot", id1}, want1},
				{[]string{"--snapshot", id2}, want2},
				{nil, want2}, // the head by default
			} {
				target := t.TempDir()
				ok(t, run(t, "restore", env, append([]string{"--home", target, "--timeout", "2m"}, c.args...)...))
				same(t, fmt.Sprintf("%s: restore %v", b.name, c.args), c.want, wholeTree(t, target))
			}

			// The older snapshot over the newer one in place: only the
			// selected paths go back, the rest of the home stays.
			before := wholeTree(t, home)
			ok(t, run(t, "restore", env, "--home", home, "--snapshot", id1, "--timeout", "2m"))
			same(t, b.name+": restore of the first snapshot over the home", afterRestore(before, want1), wholeTree(t, home))
			noLeftovers(t, home)
		})
	}
}
