package gcs_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/gcs"
	"github.com/homesnap/homesnap/internal/store/storetest"
)

var bucket = storetest.Bucket

// The client finds fake-gcs-server through STORAGE_EMULATOR_HOST itself.
func TestFakeGCS(t *testing.T) {
	storetest.Server(t, "fake-gcs-server", "STORAGE_EMULATOR_HOST")
	prefix := storetest.Prefix(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		u := &url.URL{Scheme: "gs", Host: bucket, Path: "/" + prefix, RawQuery: "part_size=1MiB&list_page_size=300"}
		s, err := gcs.Open(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestBadOptions(t *testing.T) {
	for raw, want := range map[string]string{
		"gs:///p":                     "no bucket name",
		"gs://b/p?chunk_size=1MiB":    "unknown option chunk_size",
		"gs://b/p?part_size=1KiB":     "option part_size",
		"gs://b/p?list_page_size=abc": "option list_page_size",
	} {
		_, err := store.Open(t.Context(), raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one mentioning %q", raw, err, want)
		}
	}
}
