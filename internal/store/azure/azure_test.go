package azure_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/azure"
	"github.com/homesnap/homesnap/internal/store/storetest"
)

var container = storetest.Bucket

// environ is an environment holding only vars, so that tests do not depend
// on (or change) the process's Azure variables.
func environ(vars ...string) func(string) string {
	return func(name string) string {
		for i := 0; i+1 < len(vars); i += 2 {
			if vars[i] == name {
				return vars[i+1]
			}
		}
		return ""
	}
}

// azurite returns the test connection string and its parts.
func azurite(t *testing.T) (cs, account, key, endpoint string) {
	cs = storetest.Server(t, "Azurite", "HOMESNAP_TEST_AZURE_CONNECTION_STRING")
	for _, kv := range strings.Split(cs, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "AccountName":
			account = v
		case "AccountKey":
			key = v
		case "BlobEndpoint":
			endpoint = v
		}
	}
	return cs, account, key, endpoint
}

func TestAzurite(t *testing.T) {
	cs, _, _, _ := azurite(t)
	prefix := storetest.Prefix(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		u := &url.URL{Scheme: "azblob", Host: container, Path: "/" + prefix, RawQuery: "part_size=4MiB&list_page_size=400"}
		s, err := azure.Open(t.Context(), u, environ("AZURE_STORAGE_CONNECTION_STRING", cs))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func sharedKeyURL(cont, endpoint string) *url.URL {
	return &url.URL{Scheme: "az", Host: cont, Path: "/p", RawQuery: "endpoint=" + url.QueryEscape(endpoint)}
}

// The account-key path, which the conformance run (connection string) does
// not take.
func TestSharedKey(t *testing.T) {
	_, account, key, endpoint := azurite(t)
	s, err := azure.Open(t.Context(), sharedKeyURL(container, endpoint), environ("AZURE_STORAGE_ACCOUNT", account, "AZURE_STORAGE_KEY", key))
	if err != nil {
		t.Fatal(err)
	}
	k := storetest.Prefix(t) + "/shared-key"
	if err := s.Put(t.Context(), k, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), k); err != nil {
		t.Fatal(err)
	}
}

func TestNoAccount(t *testing.T) {
	_, err := azure.Open(t.Context(), &url.URL{Scheme: "azblob", Host: "c"}, environ())
	if err == nil || !strings.Contains(err.Error(), "no storage account") {
		t.Errorf("error %v, want one saying there is no storage account", err)
	}
}
