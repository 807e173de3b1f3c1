package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/store/storetest"
	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// canaries hands out unique credential-looking values and finds them in
// output. Each is 32 letters and digits: valid in every URL position, and
// valid base64 where a key must be (an Azure account key).
type canaries map[string]string // value -> where it was put

func (c canaries) new(where string) string {
	b := make([]byte, 15)
	rand.Read(b)
	v := "Zq" + strings.ToUpper(hex.EncodeToString(b))
	c[v] = where
	return v
}

// leaked fails the test for every canary in out (case-insensitive: hosts
// come back lower-cased).
func (c canaries) leaked(t *testing.T, what, out string) {
	t.Helper()
	low := strings.ToLower(out)
	for v, where := range c {
		if strings.Contains(low, strings.ToLower(v)) {
			t.Errorf("%s: the output holds the credential put in %s:\n%s", what, where, tail(out, 3000))
		}
	}
}

// denyingServer answers every request with 403 AccessDenied, as a store
// behind the wrong credentials does.
func denyingServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// deadEndpoint is an address where nothing listens.
func deadEndpoint(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// storeForm is one kind of store URL against one server: the URL (with
// "//" standing for where user info goes) and the environment its
// credentials come from.
type storeForm struct {
	name string
	url  string
	env  []string
}

// formsAt returns every store URL form pointed at endpoint (http://host:port)
// with credentials in the environment that are canaries themselves.
func formsAt(c canaries, endpoint, dir string) []storeForm {
	host := strings.TrimPrefix(endpoint, "http://")
	ep := url.QueryEscape(endpoint)
	awsEnv := []string{"AWS_ACCESS_KEY_ID=AKIAHOMESNAPTEST", "AWS_SECRET_ACCESS_KEY=" + c.new("AWS_SECRET_ACCESS_KEY"),
		"AWS_SESSION_TOKEN=" + c.new("AWS_SESSION_TOKEN"), "AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true",
		"MINIO_ACCESS_KEY=minio", "MINIO_SECRET_KEY=" + c.new("MINIO_SECRET_KEY")}
	azKey := c.new("AZURE_STORAGE_KEY")
	// A service account key whose private key the client fails to parse,
	// and whose token endpoint is the server under test.
	sa := filepath.Join(dir, "service-account.json")
	key := fmt.Sprintf(`{"type":"service_account","project_id":"p","private_key_id":%q,"private_key":"-----BEGIN PRIVATE KEY-----\n%s\n-----END PRIVATE KEY-----\n","client_email":"a@p.iam.gserviceaccount.com","client_id":"1","token_uri":%q}`,
		c.new("GOOGLE_APPLICATION_CREDENTIALS private_key_id"), c.new("GOOGLE_APPLICATION_CREDENTIALS private_key"), endpoint+"/token")
	if err := os.WriteFile(sa, []byte(key), 0o600); err != nil {
		panic(err)
	}
	return []storeForm{
		{"file", "file://" + dir + "/store", nil},
		{"s3", "s3://bucket/p?endpoint=" + ep + "&path_style=true&max_attempts=1", awsEnv},
		{"minio", "minio://" + host + "/bucket/p?secure=false&max_attempts=1", awsEnv},
		{"gs", "gs://bucket/p?max_attempts=1", []string{"STORAGE_EMULATOR_HOST=" + host}},
		{"gs service account", "gs://bucket/p?max_attempts=1&endpoint=" + url.QueryEscape(endpoint+"/storage/v1/"),
			[]string{"STORAGE_EMULATOR_HOST=", "GOOGLE_APPLICATION_CREDENTIALS=" + sa}},
		{"azblob", "azblob://container/p?endpoint=" + url.QueryEscape(endpoint+"/acct") + "&max_attempts=1",
			[]string{"AZURE_STORAGE_ACCOUNT=acct", "AZURE_STORAGE_KEY=" + azKey, "AZURE_STORAGE_CONNECTION_STRING="}},
		{"azblob connection string", "azblob://container/p?max_attempts=1",
			[]string{"AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=" +
				c.new("AccountKey in AZURE_STORAGE_CONNECTION_STRING") + ";BlobEndpoint=" + endpoint + "/acct;"}},
	}
}

// withUserInfo puts userinfo where a URL's authority starts.
func withUserInfo(raw, userinfo string) string {
	scheme, rest, _ := strings.Cut(raw, "://")
	return scheme + "://" + userinfo + rest
}

// reaching are the variants that leave the URL valid, so that the command
// goes on to the server with credentials in its user info or fragment.
func reaching(c canaries, raw string) map[string]string {
	return map[string]string{
		"user:password": withUserInfo(raw, c.new("user info (user)")+":"+c.new("user info (password)")+"@"),
		"user only":     withUserInfo(raw, c.new("user info (user alone)")+"@"),
		"fragment":      raw + "#" + c.new("fragment"),
	}
}

// refusedURLs are the variants that a store refuses at open: credentials where
// an option goes, and a malformed URL with a credential in every position.
func refusedURLs(c canaries, raw string) map[string]string {
	q := func(s string) string {
		if strings.Contains(raw, "?") {
			return raw + "&" + s
		}
		return raw + "?" + s
	}
	scheme, rest, _ := strings.Cut(raw, "://")
	v := map[string]string{
		"secret_key=":          q("secret_key=" + c.new("query secret_key=")),
		"SAS token":            q("sv=2022-11-02&ss=b&srt=co&sp=rwdlac&se=2030-01-01T00%3A00%3A00Z&sig=" + c.new("query sig=") + "%2B%3D"),
		"bare token":           q(c.new("query, a bare token")),
		"bad part_size":        q("part_size=" + c.new("query part_size=")),
		"bad list_page_size":   q("list_page_size=" + c.new("query list_page_size=")),
		"bad escape in query":  q("sig=" + c.new("query with a bad escape") + "%zz"),
		"control character":    q("sig=" + c.new("query with a control character") + "\x7f"),
		"endpoint user info":   q("endpoint=" + url.QueryEscape("http://"+c.new("endpoint user")+":"+c.new("endpoint password")+"@127.0.0.1:9")),
		"endpoint query":       q("endpoint=" + url.QueryEscape("http://127.0.0.1:9/?sig="+c.new("endpoint query"))),
		"slash in password":    withUserInfo(raw, c.new("user (malformed URL)")+":"+c.new("password before a /")+"/"+c.new("password after a /")+"@"),
		"space in user info":   withUserInfo(raw, c.new("user info before a space")+" "+c.new("user info after a space")+"@"),
		"bad escape in path":   raw + "/" + c.new("path with a bad escape") + "%zz",
		"space in host":        scheme + "://" + c.new("host before a space") + " " + c.new("host after a space") + rest,
		"no host, a password":  scheme + "://:" + c.new("password with no user or host") + "@",
		"port that is letters": scheme + "://" + c.new("host (letters for a port)") + ":" + c.new("letters for a port") + rest,
	}
	if scheme == "file" {
		delete(v, "bad part_size")
		delete(v, "bad list_page_size")
		delete(v, "endpoint user info")
		delete(v, "endpoint query")
	}
	return v
}

// runAll runs every command that opens a store against storeURL (all, or
// the two restores), half of them taking it from the environment, and
// returns all they printed. The snapshot is taken of home.
func runAll(t *testing.T, storeURL, home string, env []string, all bool) string {
	cmds := [][]string{
		{"homesnap", "list"},
		{"restore", "--home", t.TempDir(), "--timeout", "20s"},
		{"snapshot", "--once", "--home", home, "--timeout", "20s"},
		{"prune", "--keep-last", "1", "--timeout", "20s"},
		{"homesnap", "verify", "--structure", "--timeout", "20s"},
	}
	if !all {
		cmds = cmds[:2]
	}
	var out strings.Builder
	for i, c := range cmds {
		e, args := env, c[1:]
		if i%2 == 0 {
			args = append(args, "--store", storeURL)
		} else {
			e = append(append([]string(nil), env...), "HOMESNAP_STORE="+storeURL)
		}
		r := run(t, c[0], e, args...)
		fmt.Fprintf(&out, "$ %s\nexit %d\n%s\n%s\n", strings.Join(c, " "), r.code, r.stdout, r.stderr)
	}
	return out.String()
}

// TestNoCredentialInAnyOutput puts a unique credential-looking value in
// every position of every store URL form, and in every credential
// variable, runs every command against a server that is not there, one
// that denies access and the real test servers, and looks for the values
// in everything the binaries print.
func TestNoCredentialInAnyOutput(t *testing.T) {
	testenv.Long(t, "runs every command with every kind of credential")
	c := canaries{}
	dir, home := t.TempDir(), t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir+"/store", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, server := range []struct{ name, endpoint string }{
		{"nothing listening", deadEndpoint(t)},
		{"access denied", denyingServer(t)},
	} {
		for _, f := range formsAt(c, server.endpoint, dir) {
			for v, raw := range reaching(c, f.url) {
				what := fmt.Sprintf("%s, %s, %s", server.name, f.name, v)
				c.leaked(t, what, runAll(t, raw, home, f.env, true))
			}
			if server.name != "access denied" {
				continue // refused before any request: one server is enough
			}
			for v, raw := range refusedURLs(c, f.url) {
				what := fmt.Sprintf("%s, %s", f.name, v)
				out := runAll(t, raw, home, f.env, false)
				if !strings.Contains(out, "exit ") || strings.Contains(out, "exit 0\n") {
					t.Errorf("%s: a command accepted the URL:\n%s", what, out)
				}
				c.leaked(t, what, out)
			}
		}
	}
}

// TestNoCredentialInOutputOnRealServers runs the user info and fragment
// variants, which leave the URL valid, against the real test servers: with
// a fragment the commands go all the way and print the store's name in
// their logs; minio:// sends the user info as its keys, which the server
// rejects; the others refuse user info.
func TestNoCredentialInOutputOnRealServers(t *testing.T) {
	c := canaries{}
	prefix, home := storetest.Prefix(t), t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	ep := storetest.Server(t, "versitygw", "HOMESNAP_TEST_S3_ENDPOINT")
	gcsHost := storetest.Server(t, "fake-gcs-server", "STORAGE_EMULATOR_HOST")
	azConn := storetest.Server(t, "Azurite", "HOMESNAP_TEST_AZURE_CONNECTION_STRING")
	removeS3AtEnd(t, ep, prefix)
	removeAzureAtEnd(t, azConn, prefix)
	for _, f := range []storeForm{
		{"s3", s3URL(ep, prefix, "&max_attempts=2"), s3Env()},
		{"minio", fmt.Sprintf("minio://%s/%s/%s?secure=false&max_attempts=2", hostOf(t, ep), testBucket, prefix), s3Env()},
		{"gs", fmt.Sprintf("gs://%s/%s?max_attempts=2", testBucket, prefix), []string{"STORAGE_EMULATOR_HOST=" + gcsHost}},
		{"azblob", fmt.Sprintf("azblob://%s/%s?max_attempts=2", testBucket, prefix),
			[]string{"AZURE_STORAGE_CONNECTION_STRING=" + azConn, "AZURE_STORAGE_ACCOUNT=", "AZURE_STORAGE_KEY="}},
	} {
		for v, raw := range reaching(c, f.url) {
			c.leaked(t, f.name+", "+v, runAll(t, raw, home, f.env, true))
		}
	}
}
