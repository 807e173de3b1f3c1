package s3proto

import (
	"fmt"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/backend"
)

// Cause explains an S3 error code: kind is the sentinel the code means, if
// any, and hint says what went wrong and what to do. creds names where the
// backend takes its credentials from.
func Cause(code, bucket, creds string) (hint string, kind error) {
	switch code {
	case "NoSuchKey", "NotFound":
		return "", store.ErrNotExist
	case "NoSuchBucket":
		return backend.MissingBucket("bucket", bucket), store.ErrNotExist
	case "PreconditionFailed", "ConditionalRequestConflict":
		return "", store.ErrPrecondition
	case "InvalidAccessKeyId", "XAdminUserNotFound": // the latter from versitygw
		return "the access key is not known to the server: check " + creds, nil
	case "SignatureDoesNotMatch":
		return "the secret key does not match the access key: check " + creds, nil
	case "ExpiredToken", "TokenRefreshRequired", "InvalidToken":
		return "the session token is invalid or expired: refresh the credentials (" + creds + ")", nil
	case "AccessDenied", "AllAccessDisabled", "AccountProblem":
		return fmt.Sprintf("access denied: allow the identity from %s to get, put, delete and list objects in bucket %q", creds, bucket), nil
	case "PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException":
		return fmt.Sprintf("bucket %q is in another region: set region= in the store URL or AWS_REGION", bucket), nil
	}
	return "", nil
}
