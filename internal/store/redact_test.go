package store

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
)

// secret stands for a credential; no message may hold it.
const secret = "Zq7SECRETvalue"

func TestRedact(t *testing.T) {
	for raw, want := range map[string]string{
		"/var/backups/jenkins":                               "/var/backups/jenkins",
		"s3://bucket/prefix":                                 "s3://bucket/prefix",
		"s3://bucket/prefix?region=eu-west-1&max_attempts=3": "s3://bucket/prefix",
		"minio://AKIA:" + secret + "@host:9000/b/p?secure=1": "minio://host:9000/b/p",
		"minio://" + secret + "@host:9000/b/p":               "minio://host:9000/b/p",
		"azblob://c/p?sv=2022&sig=" + secret:                 "azblob://c/p",
		"s3://bucket/p?" + secret:                            "s3://bucket/p",
		"gs://bucket/p#" + secret:                            "gs://bucket/p",
		"file:///srv/store?" + secret:                        "file:///srv/store",
		// Malformed: only the scheme is left.
		"s3://AKIA:" + secret + "/x@bucket/p":     "s3://(malformed URL, not shown)",
		"minio://a:" + secret + "1.2.3.4:9000/b":  "minio://(malformed URL, not shown)",
		"s3://" + secret + " x@bucket/p":          "s3://(malformed URL, not shown)",
		"s3://bucket/p%zz" + secret:               "s3://(malformed URL, not shown)",
		"s3://bucket/p?sig=" + secret + "\x7f":    "s3://(malformed URL, not shown)",
		"s 3://" + secret + "@bucket/p":           "(malformed store URL, not shown)",
		"://" + secret + ":" + secret + "@bucket": "(malformed store URL, not shown)",
	} {
		if got := Redact(raw); got != want {
			t.Errorf("Redact(%q) = %q, want %q", raw, got, want)
		}
	}
}

// TestParseErrorsHoldNoURL: url.Parse's error quotes the URL whole, and
// its causes quote parts of it; neither may survive in the chain.
func TestParseErrorsHoldNoURL(t *testing.T) {
	for _, raw := range []string{
		"s3://AKIA:" + secret + "/x@bucket/p",
		"minio://a:" + secret + "1.2.3.4:9000/b/p",
		"s3://" + secret + " x@bucket/p",
		"s3://bucket/" + secret + "%zz",
		"s3://bucket/p?sig=" + secret + "\x7f",
		"s3://bucket:" + secret + "/p",
	} {
		_, err := Open(context.Background(), raw)
		if err == nil {
			t.Errorf("Open(%q) succeeded", raw)
			continue
		}
		for e := err; e != nil; e = errors.Unwrap(e) {
			var ue *url.Error
			if errors.As(e, &ue) {
				t.Errorf("Open(%q): a url.Error survives in the chain: %v", raw, ue)
			}
			if strings.Contains(e.Error(), secret) {
				t.Errorf("Open(%q): %q holds the credential", raw, e)
			}
		}
		if !strings.Contains(err.Error(), "s3://") && !strings.Contains(err.Error(), "minio://") {
			t.Errorf("Open(%q): %q does not name the scheme", raw, err)
		}
	}
}
