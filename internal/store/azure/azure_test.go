package azure_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

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

func TestWrongCredentials(t *testing.T) {
	_, account, _, endpoint := azurite(t)
	wrong := "d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXkgd3Jvbmcga2V5IHdyb25nIGtleQ=="
	storetest.FailsFast(t, 10*time.Second, func(ctx context.Context) (store.Store, error) {
		return azure.Open(ctx, sharedKeyURL(container, endpoint), environ("AZURE_STORAGE_ACCOUNT", account, "AZURE_STORAGE_KEY", wrong))
	}, "open az://"+container+"/p", "credentials were rejected", "AZURE_STORAGE_KEY")
}

func TestMissingContainer(t *testing.T) {
	cs, _, _, _ := azurite(t)
	var err error
	storetest.FailsFast(t, 10*time.Second, func(ctx context.Context) (s store.Store, _ error) {
		s, err = azure.Open(ctx, &url.URL{Scheme: "azblob", Host: "homesnap-no-such-container", Path: "/p"}, environ("AZURE_STORAGE_CONNECTION_STRING", cs))
		return s, err
	}, `container "homesnap-no-such-container" does not exist: create it or fix --store`)
	if !errors.Is(err, store.ErrNotExist) {
		t.Errorf("error does not wrap ErrNotExist")
	}
}

func TestNoAccount(t *testing.T) {
	_, err := azure.Open(t.Context(), &url.URL{Scheme: "azblob", Host: "c"}, environ())
	if err == nil || !strings.Contains(err.Error(), "no storage account") {
		t.Errorf("error %v, want one saying there is no storage account", err)
	}
}

func TestLostAnswers(t *testing.T) {
	cs, _, _, endpoint := azurite(t)
	u, _ := url.Parse(endpoint)
	addr := storetest.Proxy(t, u.Host, storetest.CutAnswers)
	prefix := storetest.Prefix(t)
	su := &url.URL{Scheme: "azblob", Host: container, Path: "/" + prefix, RawQuery: "part_size=4MiB"}
	flaky, err := azure.Open(t.Context(), su, environ("AZURE_STORAGE_CONNECTION_STRING", strings.Replace(cs, u.Host, addr, 1)))
	if err != nil {
		t.Fatal(err)
	}
	direct, err := azure.Open(t.Context(), su, environ("AZURE_STORAGE_CONNECTION_STRING", cs))
	if err != nil {
		t.Fatal(err)
	}
	storetest.LostAnswers(t, flaky, direct)
}

func TestResumedReads(t *testing.T) {
	cs, _, _, endpoint := azurite(t)
	u, _ := url.Parse(endpoint)
	addr := storetest.Proxy(t, u.Host, storetest.CutEvery(3<<20))
	su := &url.URL{Scheme: "azblob", Host: container, Path: "/" + storetest.Prefix(t)}
	flaky, err := azure.Open(t.Context(), su, environ("AZURE_STORAGE_CONNECTION_STRING", strings.Replace(cs, u.Host, addr, 1)))
	if err != nil {
		t.Fatal(err)
	}
	direct, err := azure.Open(t.Context(), su, environ("AZURE_STORAGE_CONNECTION_STRING", cs))
	if err != nil {
		t.Fatal(err)
	}
	storetest.ResumedReads(t, flaky, direct)
}
