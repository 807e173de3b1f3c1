package all_test

import (
	"slices"
	"testing"

	_ "github.com/homesnap/homesnap/internal/store/all"

	"github.com/homesnap/homesnap/internal/store"
)

func TestSchemes(t *testing.T) {
	want := []string{"az", "azblob", "file", "gs", "minio", "s3"}
	if got := store.Schemes(); !slices.Equal(got, want) {
		t.Errorf("Schemes() = %q, want %q", got, want)
	}
}
