package s3

import (
	"errors"
	"fmt"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/homesnap/homesnap/internal/store/backend"
)

// creds tells the user where this backend's credentials come from.
const creds = "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or the pod's IAM role (IRSA or EKS pod identity)"

// code is the S3 error code of err, derived from the status for bodiless
// (HEAD) answers; "" when err is not an S3 error.
func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() != "" {
		return ae.ErrorCode()
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		switch re.HTTPStatusCode() {
		case http.StatusNotFound:
			return "NotFound"
		case http.StatusPreconditionFailed:
			return "PreconditionFailed"
		case http.StatusForbidden:
			return "AccessDenied"
		case http.StatusRequestedRangeNotSatisfiable:
			return "InvalidRange"
		}
	}
	return ""
}

func (s *Store) fail(op, key string, err error) error {
	return s.objects.Fail(op, key, shorten(err))
}

// shorten keeps the S3 operation, status, code and message of an API
// error and drops the SDK's request and host IDs. (nil stays nil.)
func shorten(err error) error {
	var oe *smithy.OperationError
	var ae smithy.APIError
	var re *awshttp.ResponseError
	if !errors.As(err, &oe) || !errors.As(err, &ae) || !errors.As(err, &re) {
		return err
	}
	msg := fmt.Sprintf("%s: %d %s", oe.Operation(), re.HTTPStatusCode(), ae.ErrorCode())
	if m := ae.ErrorMessage(); m != "" {
		msg += ": " + m
	}
	return backend.Retext(msg, err)
}
