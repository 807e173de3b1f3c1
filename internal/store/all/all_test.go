package all_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	_ "github.com/homesnap/homesnap/internal/store/all"

	"github.com/homesnap/homesnap/internal/store"
)

// backends are the backends a build tag leaves out, with their schemes and
// the modules only they bring in.
var backends = []struct {
	tag     string
	schemes []string
	modules []string
}{
	{"homesnap_nos3", []string{"s3"}, []string{"github.com/aws/aws-sdk-go-v2/service/s3"}},
	{"homesnap_nominio", []string{"minio"}, []string{"github.com/minio/minio-go/v7"}},
	{"homesnap_nogcs", []string{"gs"}, []string{"cloud.google.com/go/storage", "google.golang.org/grpc"}},
	{"homesnap_noazure", []string{"azblob", "az"}, []string{"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"}},
}

// In any build, the file store is in, and a backend's scheme is either
// opened or refused naming the tag that left it out, with what to do.
func TestSchemes(t *testing.T) {
	schemes := store.Schemes()
	t.Logf("schemes: %v", schemes) // TestBuildTags reads it
	if !slices.Contains(schemes, "file") {
		t.Errorf("Schemes() = %q: the file store is always in", schemes)
	}
	for _, b := range backends {
		for _, s := range b.schemes {
			if slices.Contains(schemes, s) {
				continue
			}
			url := s + "://bucket/prefix"
			_, err := store.Open(context.Background(), url)
			var se *store.SchemeError
			if !errors.As(err, &se) || se.Tag != b.tag {
				t.Errorf("open %s in a build without it: %v, want a SchemeError naming %s", url, err, b.tag)
				continue
			}
			for _, want := range []string{url, "built without", b.tag, "use the full image"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("open %s: %q does not say %q", url, err, want)
				}
			}
		}
	}
}
