package store

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A URL of a backend this build left out names the backend, the build tag
// and what to use instead, and keeps the credentials out; an unknown
// scheme lists the schemes there are.
func TestOpenSchemeErrors(t *testing.T) {
	LeftOut("leftout", "Left-Out Cloud", "homesnap_noleftout")
	_, err := Open(context.Background(), "leftout://key:"+secret+"@bucket/prefix")
	var se *SchemeError
	if !errors.As(err, &se) || se.Tag != "homesnap_noleftout" {
		t.Fatalf("Open: %v, want a SchemeError naming the tag", err)
	}
	for _, want := range []string{"leftout://", "bucket/prefix", "built without Left-Out Cloud support", "homesnap_noleftout", "use the full image"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("%q holds the URL's password", err)
	}
	_, err = Open(context.Background(), "ftp://bucket/prefix")
	if !errors.As(err, &se) || se.Tag != "" || !strings.Contains(err.Error(), `unknown scheme "ftp"`) {
		t.Errorf("Open(ftp://): %v, want an unknown scheme", err)
	}
}
