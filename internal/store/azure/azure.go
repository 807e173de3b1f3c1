// Package azure stores objects as block blobs in Azure Blob Storage:
//
//	azblob://container/prefix?account=NAME
//	az://container/prefix?endpoint=https://NAME.blob.core.windows.net
//
// Credentials, in order: AZURE_STORAGE_CONNECTION_STRING; the account's
// key in AZURE_STORAGE_KEY; otherwise azidentity's DefaultAzureCredential
// (workload identity, managed identity, Azure CLI). The account comes from
// account= or AZURE_STORAGE_ACCOUNT. Options: account, endpoint,
// part_size (block size), upload_concurrency, list_page_size, max_attempts.
package azure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/backend"
)

func init() {
	open := func(ctx context.Context, u *url.URL) (store.Store, error) { return Open(ctx, u, os.Getenv) }
	store.Register("azblob", open)
	store.Register("az", open)
}

// creds tells the user where this backend's credentials come from.
const creds = "AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_ACCOUNT/AZURE_STORAGE_KEY or the pod's workload identity"

// Store is an Azure blob container, or a prefix inside one.
type Store struct {
	container   *container.Client
	name        string
	containerID string
	prefix      backend.Prefix
	blockSize   int64
	concurrency int
	pageSize    int32
}

// Open opens the store named by u, taking credentials from getenv (tests
// pass their own environment).
func Open(ctx context.Context, u *url.URL, getenv func(string) string) (*Store, error) {
	cont, prefix, name, err := backend.BucketURL(u, "container")
	if err != nil {
		return nil, err
	}
	o := backend.NewOptions(u)
	account := o.String("account", getenv("AZURE_STORAGE_ACCOUNT"))
	endpoint := o.Endpoint("endpoint")
	s := &Store{
		name:        name,
		containerID: cont,
		prefix:      prefix,
		blockSize:   o.Size("part_size", backend.DefaultPartSize, 1<<20, 4000<<20),
		concurrency: o.Int("upload_concurrency", backend.DefaultConcurrency, 1, 64),
		pageSize:    int32(o.Int("list_page_size", backend.DefaultPageSize, 1, 5000)),
	}
	opts := &azblob.ClientOptions{ClientOptions: policy.ClientOptions{Retry: policy.RetryOptions{
		MaxRetries:    int32(o.Int("max_attempts", 10, 1, 100) - 1),
		RetryDelay:    200 * time.Millisecond,
		MaxRetryDelay: 20 * time.Second,
	}}}
	if err := o.Err(); err != nil {
		return nil, err
	}
	fail := func(err error) error { return &store.Error{Op: "open", Store: name, Err: err} }
	if endpoint == "" && account != "" {
		endpoint = "https://" + account + ".blob.core.windows.net/"
	}
	var client *azblob.Client
	switch cs, key := getenv("AZURE_STORAGE_CONNECTION_STRING"), getenv("AZURE_STORAGE_KEY"); {
	case cs != "":
		client, err = azblob.NewClientFromConnectionString(cs, opts)
	case endpoint == "":
		return nil, fail(errors.New("no storage account: add ?account=NAME to the store URL or set AZURE_STORAGE_ACCOUNT or AZURE_STORAGE_CONNECTION_STRING"))
	case key != "":
		var cred *azblob.SharedKeyCredential
		if cred, err = azblob.NewSharedKeyCredential(account, key); err == nil {
			client, err = azblob.NewClientWithSharedKeyCredential(endpoint, cred, opts)
		}
	default:
		var cred *azidentity.DefaultAzureCredential
		if cred, err = azidentity.NewDefaultAzureCredential(nil); err == nil {
			client, err = azblob.NewClient(endpoint, cred, opts)
		}
	}
	if err != nil {
		return nil, fail(fmt.Errorf("%w: check %s", err, creds))
	}
	s.container = client.ServiceClient().NewContainerClient(cont)
	if err := s.probe(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// probe lists one blob so that a missing container or bad credentials fail
// at open; an identity that may not list passes (restore needs no listing).
func (s *Store) probe(ctx context.Context) error {
	p := s.container.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: to.Ptr(string(s.prefix)), MaxResults: to.Ptr[int32](1)})
	_, err := p.NextPage(ctx)
	if err != nil && !bloberror.HasCode(err, bloberror.AuthorizationPermissionMismatch) {
		return s.fail("open", "", err)
	}
	return nil
}

func (s *Store) String() string { return s.name }

func (s *Store) Close() error { return nil }

func status(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

func (s *Store) fail(op, key string, err error) error {
	var kind error
	hint := ""
	switch {
	case bloberror.HasCode(err, bloberror.ContainerNotFound):
		kind, hint = store.ErrNotExist, backend.MissingBucket("container", s.containerID)
	case bloberror.HasCode(err, bloberror.BlobNotFound) || status(err) == http.StatusNotFound:
		kind = store.ErrNotExist
	case bloberror.HasCode(err, bloberror.ConditionNotMet, bloberror.BlobAlreadyExists) || status(err) == http.StatusPreconditionFailed:
		kind = store.ErrPrecondition
	case bloberror.HasCode(err, bloberror.AuthenticationFailed, bloberror.NoAuthenticationInformation, bloberror.InvalidAuthenticationInfo):
		hint = "the credentials were rejected: check " + creds
	case bloberror.HasCode(err, bloberror.AuthorizationFailure):
		// Azure: a firewall or disabled account; Azurite: a bad key.
		hint = "the credentials were rejected or the account's network rules refuse this client: check " + creds
	case bloberror.HasCode(err, bloberror.AuthorizationPermissionMismatch) || status(err) == http.StatusForbidden:
		hint = fmt.Sprintf("access denied: grant the identity from %s the Storage Blob Data Contributor role on container %q", creds, s.containerID)
	}
	return backend.Fail(op, s.name, key, kind, hint, shorten(err))
}

func (s *Store) blob(key string) *blockblob.Client {
	return s.container.NewBlockBlobClient(s.prefix.Key(key))
}

// Put stages blocks of blockSize, at most concurrency at once, and commits
// the block list at the end: until then the blob does not change, and
// uncommitted blocks of an abandoned upload are garbage-collected by Azure.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	_, err := s.blob(key).UploadStream(ctx, r, &blockblob.UploadStreamOptions{
		BlockSize: s.blockSize, Concurrency: s.concurrency,
	})
	if err != nil {
		return s.fail("put", key, err)
	}
	return nil
}

func (s *Store) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if length == 0 {
		return s.empty(ctx, key)
	}
	// Count 0 means "to the end".
	resp, err := s.blob(key).DownloadStream(ctx, &blob.DownloadStreamOptions{Range: blob.HTTPRange{Offset: offset, Count: max(length, 0)}})
	if bloberror.HasCode(err, bloberror.InvalidRange) {
		return s.empty(ctx, key) // offset at or past the end
	}
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	// The retry reader resumes where a dropped connection broke, pinned
	// to the ETag of the first answer.
	return &failReader{resp.NewRetryReader(ctx, &blob.RetryReaderOptions{MaxRetries: 5}), func(err error) error {
		return s.fail("get", key, err)
	}}, nil
}

// failReader gives read errors the same form as every other error.
type failReader struct {
	io.ReadCloser
	fail func(error) error
}

func (r *failReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = r.fail(err)
	}
	return n, err
}

// empty returns an empty body for key, or the error saying it is missing.
func (s *Store) empty(ctx context.Context, key string) (io.ReadCloser, error) {
	if _, err := s.blob(key).GetProperties(ctx, nil); err != nil {
		return nil, s.fail("get", key, err)
	}
	return io.NopCloser(strings.NewReader("")), nil
}

func (s *Store) List(ctx context.Context, prefix string, fn func(store.Object) error) error {
	p := s.container.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: to.Ptr(s.prefix.Key(prefix)), MaxResults: &s.pageSize})
	for p.More() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return s.fail("list", prefix, err)
		}
		for _, b := range page.Segment.BlobItems {
			o := store.Object{Key: s.prefix.Trim(*b.Name)}
			if b.Properties != nil {
				o.Size = deref(b.Properties.ContentLength, 0)
				o.Modified = deref(b.Properties.LastModified, time.Time{})
			}
			if err := fn(o); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete removes keys with parallel single deletes (Azurite does not
// implement blob batches).
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	return backend.Parallel(ctx, backend.DeleteParallelism, keys, func(ctx context.Context, key string) error {
		_, err := s.blob(key).Delete(ctx, &blob.DeleteOptions{DeleteSnapshots: to.Ptr(blob.DeleteSnapshotsOptionTypeInclude)})
		if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
			return s.fail("delete", key, err)
		}
		return nil
	})
}

func (s *Store) Load(ctx context.Context, key string) ([]byte, store.Version, error) {
	resp, err := s.blob(key).DownloadStream(ctx, nil)
	if err != nil {
		return nil, "", s.fail("load", key, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", s.fail("load", key, err)
	}
	return data, store.Version(deref(resp.ETag, "")), nil
}

// Swap writes the blob in one request with If-None-Match: * (create) or
// If-Match: ETag.
func (s *Store) Swap(ctx context.Context, key string, data []byte, old store.Version) (store.Version, error) {
	cond := &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}
	if old != "" {
		cond = &blob.ModifiedAccessConditions{IfMatch: to.Ptr(azcore.ETag(old))}
	}
	resp, err := s.blob(key).Upload(ctx, streaming.NopCloser(bytes.NewReader(data)), &blockblob.UploadOptions{
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: cond},
	})
	if err != nil {
		if old != "" && bloberror.HasCode(err, bloberror.BlobNotFound) {
			return "", backend.Fail("swap", s.name, key, store.ErrPrecondition, "", err)
		}
		return "", s.fail("swap", key, err)
	}
	return store.Version(deref(resp.ETag, "")), nil
}

// shorten replaces the SDK's multi-line error dump (request, response
// body, separators) with one line that keeps status and error code.
func shorten(err error) error {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return err
	}
	return backend.Retext(fmt.Sprintf("%d %s", re.StatusCode, re.ErrorCode), err)
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
