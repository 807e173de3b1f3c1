package store

// A store URL can carry credentials: keys in its user info, tokens or
// signatures in its query (secret_key=, sig=, a SAS token), and when it is
// malformed there is no telling which part is which. Everything that puts a
// store URL into a message or a log goes through Redact, and a URL that does
// not parse never reaches an error chain (url.Error quotes it whole).

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Redact returns raw fit for messages and logs: a URL keeps its scheme,
// host and path, and loses its user info, query and fragment; a URL that
// does not parse keeps only its scheme. A plain directory path is shown as
// it is.
func Redact(raw string) string {
	if !strings.Contains(raw, "://") {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return schemeOnly(raw)
	}
	return RedactURL(u)
}

// RedactURL is Redact for a URL already parsed.
func RedactURL(u *url.URL) string {
	if !validHost(u.Host) {
		return schemeOnly(u.Scheme + "://")
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
}

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]{0,15}$`)

// schemeOnly names a URL that does not parse by its scheme alone.
func schemeOnly(raw string) string {
	if scheme, _, _ := strings.Cut(raw, "://"); schemeRE.MatchString(scheme) {
		return scheme + "://(malformed URL, not shown)"
	}
	return "(malformed store URL, not shown)"
}

// parseError replaces url.Parse's error, which quotes the whole URL and
// whose causes quote parts of it (a port is whatever follows a colon, in a
// password too), with one that says what kind of mistake it was.
func parseError(raw string, err error) error {
	why := "it is malformed"
	var esc url.EscapeError
	var host url.InvalidHostError
	msg := err.Error()
	switch {
	case errors.As(err, &esc):
		why = "a % is not followed by two hex digits"
	case errors.As(err, &host), err == errBadHost, strings.Contains(msg, "invalid port"):
		why = "its host or port is malformed (a / @ or : in user info must be escaped as %2F %40 %3A)"
	case strings.Contains(msg, "invalid userinfo"):
		why = "its user info holds a character that must be escaped"
	case strings.Contains(msg, "control character"):
		why = "it holds a control character"
	case strings.Contains(msg, "missing protocol scheme"):
		why = "it has no scheme"
	}
	return fmt.Errorf("store URL %s does not parse: %s; it is not shown, since it may hold credentials", schemeOnly(raw), why)
}

// hostRE is what a store URL's host can be: a bucket or container name,
// or a server's name or address with a port. url.Parse lets more through
// (colons inside the host: a password with an unescaped "/" after it), and
// an SDK parsing it again would quote it.
var hostRE = regexp.MustCompile(`^([A-Za-z0-9._-]*|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$`)

var errBadHost = errors.New("malformed host")

func validHost(h string) bool { return hostRE.MatchString(h) }
