package s3store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"pdq/publish/store"
)

// credentialsHint tells the user where credentials come from.
const credentialsHint = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, for this endpoint"

// mapErr turns an SDK error into one wrapping the store's sentinel errors, naming the operation,
// the object and, for refused credentials, where to set them.
func (s *Store) mapErr(op, key string, err error) error {
	where := s.url(key)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("s3: %s %s: %w", op, where, err)
	}
	tries := ""
	if ma := (*retry.MaxAttemptsError)(nil); errors.As(err, &ma) {
		tries = fmt.Sprintf(" (tried %d times)", ma.Attempt)
	}
	if st := (*stalledError)(nil); errors.As(err, &st) {
		return fmt.Errorf("s3: %s %s: %w: %s sent and received nothing for %s%s", op, where, store.ErrStalled, s.where, st.after, tries)
	}
	if ne := (*net.OpError)(nil); errors.As(err, &ne) {
		why := ne.Err.Error()
		if se := (*os.SyscallError)(nil); errors.As(ne.Err, &se) {
			why = se.Err.Error()
		}
		return fmt.Errorf("s3: %s %s: %w %s: %s%s", op, where, store.ErrUnreachable, s.where, why, tries)
	}
	if de := (*net.DNSError)(nil); errors.As(err, &de) {
		return fmt.Errorf("s3: %s %s: %w %s: %s%s", op, where, store.ErrUnreachable, s.where, de.Error(), tries)
	}
	var sentinel error
	code, msg := "", ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code, msg = ae.ErrorCode(), ae.ErrorMessage()
		switch code {
		case "NoSuchKey", "NotFound", "NoSuchUpload", "NoSuchBucket":
			sentinel = store.ErrNotExist
		case "PreconditionFailed", "ConditionalRequestConflict":
			sentinel = store.ErrExists
		case "BadDigest", "InvalidDigest", "XAmzContentChecksumMismatch", "XAmzContentSHA256Mismatch":
			sentinel = store.ErrChecksum
		case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "Forbidden",
			"InvalidToken", "ExpiredToken", "TokenRefreshRequired", "InvalidClientTokenId",
			"XAdminUserNotFound": // versitygw's answer (404) to an unknown access key id
			sentinel = store.ErrAuth
		case "InvalidPart", "InvalidPartOrder", "EntityTooSmall":
			sentinel = store.ErrInvalidPart
		}
		if code == "NoSuchBucket" {
			return s.noBucket()
		}
	}
	if sentinel == nil {
		var re *awshttp.ResponseError
		if errors.As(err, &re) {
			switch re.HTTPStatusCode() {
			case http.StatusNotFound:
				sentinel = store.ErrNotExist
			case http.StatusPreconditionFailed:
				sentinel = store.ErrExists
			case http.StatusForbidden:
				sentinel = store.ErrAuth
			}
		}
	}
	if sentinel == nil && (strings.Contains(err.Error(), "failed to retrieve credentials") ||
		strings.Contains(err.Error(), "failed to refresh cached credentials")) {
		sentinel = store.ErrAuth
		code, msg = "no credentials", "none found in the environment, config files or instance role"
	}
	if sentinel == store.ErrAuth {
		why := code + ": " + msg
		switch {
		case code == "" || code == "Forbidden":
			why = "403 Forbidden (wrong secret, unknown key or no permission)"
		case msg == "":
			why = code
		}
		return fmt.Errorf("s3: %s %s: %w by %s: %s; %s", op, where, sentinel, s.where, why, credentialsHint)
	}
	if sentinel != nil {
		if code != "" {
			return fmt.Errorf("s3: %s %s: %w (%s: %s)", op, where, sentinel, code, msg)
		}
		return fmt.Errorf("s3: %s %s: %w", op, where, sentinel)
	}
	if code != "" {
		return fmt.Errorf("s3: %s %s: %s answered %s: %s%s", op, where, s.where, code, msg, tries)
	}
	if re := (*awshttp.ResponseError)(nil); errors.As(err, &re) && re.HTTPStatusCode() != 0 {
		return fmt.Errorf("s3: %s %s: %s answered HTTP %d %s%s", op, where, s.where, re.HTTPStatusCode(), http.StatusText(re.HTTPStatusCode()), tries)
	}
	return fmt.Errorf("s3: %s %s: %w", op, where, err)
}
