package s3store_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"pdq/publish/store"
	"pdq/publish/store/s3store"
)

// captureStderr runs fn with os.Stderr going to a pipe and returns what was written there.
func captureStderr(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	defer func() {
		os.Stderr = old
	}()
	fn()
	os.Stderr = old
	w.Close()
	return <-done
}

// The SDK's own log lines ("SDK 2026/01/02 WARN falling back to IMDSv1") never reach stderr:
// here the instance metadata service (a local stand-in) refuses the token, which makes the SDK
// warn, on the way to a missing-credentials error.
func TestS3SDKLinesStayOffStderr(t *testing.T) {
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	defer imds.Close()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_EC2_METADATA_DISABLED", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"} {
		t.Setenv(k, "")
	}
	none := filepath.Join(t.TempDir(), "none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", none)
	t.Setenv("AWS_CONFIG_FILE", none)
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)
	var err error
	out := captureStderr(t, func() {
		var st *s3store.Store
		st, err = s3store.New(context.Background(), s3store.Config{Bucket: "b", Region: "us-east-1", MaxAttempts: 1})
		if err == nil {
			_, err = st.Stat(context.Background(), "x")
		}
	})
	if !errors.Is(err, store.ErrAuth) {
		t.Errorf("Stat without credentials: %v, want ErrAuth", err)
	}
	if out != "" {
		t.Errorf("the SDK wrote to stderr:\n%s", out)
	}
}

// A server that cannot be reached is one plain line: no "exceeded maximum number of
// attempts" or "https response error StatusCode: 0".
func TestS3UnreachableIsPlain(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	st, err := s3store.New(context.Background(), s3store.Config{Bucket: "b", Endpoint: endpoint, Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Stat(context.Background(), "x")
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if !errors.Is(err, store.ErrUnreachable) || !strings.Contains(msg, "connection refused") || !strings.Contains(msg, endpoint) {
		t.Errorf("Stat on a closed port: %q, want ErrUnreachable naming %s and the refused connection", msg, endpoint)
	}
	for _, leak := range []string{"exceeded maximum number of attempts", "StatusCode", "RequestID", "operation error", "\n"} {
		if strings.Contains(msg, leak) {
			t.Errorf("message %q contains the SDK's %q", msg, leak)
		}
	}
}
