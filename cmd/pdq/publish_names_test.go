package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"pdq/publish/store"
	"pdq/publish/store/s3store/s3test"
)

// File names with terminal escapes, a newline and a right-to-left override reach the output of
// publish, verify and pull quoted, never raw.
func TestPublishPullVerifyQuoteNames(t *testing.T) {
	decode := pubTestDir(t)
	evil := []string{"evil\x1b[2J.txt", "new\nline.txt", "rtl\u202egnp.exe"}
	for _, n := range evil {
		if err := os.WriteFile(filepath.Join(decode, n), []byte("x"), 0o644); err != nil {
			t.Skipf("file system refuses %q: %v", n, err)
		}
	}
	url := filepath.Join(t.TempDir(), "v1")
	o := pubFlags()
	o.asJSON = false
	ctx := context.Background()
	check := func(what string, out *bytes.Buffer) {
		t.Helper()
		s := out.String()
		if strings.ContainsAny(s, "\x1b\u202e") || strings.Contains(s, "new\nline") {
			t.Errorf("%s printed a name raw:\n%s", what, s)
		}
		for _, q := range []string{`"evil\x1b[2J.txt"`, `"new\nline.txt"`, `"rtl\u202egnp.exe"`} {
			if !strings.Contains(s, q) {
				t.Errorf("%s output lacks %s:\n%s", what, q, s)
			}
		}
	}
	var out bytes.Buffer
	if err := runPublish(ctx, &out, decode, url, o); err != nil {
		t.Fatal(err)
	}
	check("publish", &out)
	out.Reset()
	if err := runVerifyRemote(ctx, &out, url, remoteVerifyOptions{Deep: true}); err != nil {
		t.Fatal(err)
	}
	check("verify", &out)
	out.Reset()
	if err := runPull(ctx, &out, url, filepath.Join(t.TempDir(), "copy"), o.storeFlags); err != nil {
		t.Fatal(err)
	}
	check("pull", &out)
}

// pdq verify PATH works for a local store given as a plain path, as the docs say.
func TestVerifyPlainStorePath(t *testing.T) {
	decode := pubTestDir(t)
	url := filepath.Join(t.TempDir(), "v1")
	if err := runPublish(context.Background(), new(bytes.Buffer), decode, url, pubFlags()); err != nil {
		t.Fatal(err)
	}
	root := newRootCmd()
	var out bytes.Buffer
	root.SetArgs([]string{"verify", url, "--deep"})
	root.SetOut(&out)
	root.SetErr(new(bytes.Buffer))
	if err := root.Execute(); err != nil {
		t.Fatalf("pdq verify %s: %v", url, err)
	}
	if !strings.Contains(out.String(), "3 files match the manifest") {
		t.Fatalf("verify output:\n%s", out.String())
	}
}

func TestS3MissingBucketSaysSo(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	o := pubFlags()
	want := "bucket no-such-bucket does not exist at " + srv.Endpoint + " (create it first)"
	err := runPublish(context.Background(), new(bytes.Buffer), pubTestDir(t), "s3://no-such-bucket/v1", o)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("publish to a missing bucket: %v, want %q", err, want)
	}
	err = runPull(context.Background(), new(bytes.Buffer), "s3://no-such-bucket/v1", t.TempDir(), o.storeFlags)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("pull from a missing bucket: %v, want %q", err, want)
	}
}

// With a non-AWS endpoint and no credentials anywhere: one line saying so, and the EC2 instance
// metadata service (here a local stand-in that counts requests) is never asked.
func TestS3NoCredentialsNoIMDSProbe(t *testing.T) {
	srv := s3test.Start(t)
	var probes atomic.Int32
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probes.Add(1)
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
	o := pubFlags()
	o.endpoint = srv.Endpoint
	err := runPull(context.Background(), new(bytes.Buffer), "s3://models/v1", t.TempDir(), o.storeFlags)
	if !errors.Is(err, store.ErrAuth) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "no credentials for "+srv.Endpoint) {
		t.Errorf("pull without credentials: %q, want one line about missing credentials", err)
	}
	if n := probes.Load(); n != 0 {
		t.Errorf("the instance metadata service was asked %d times for a non-AWS endpoint", n)
	}
}
