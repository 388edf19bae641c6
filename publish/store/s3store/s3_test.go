package s3store_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"pdq/publish/store"
	"pdq/publish/store/s3store"
	"pdq/publish/store/s3store/s3test"
	"pdq/publish/store/storetest"
)

func TestS3Suite(t *testing.T) {
	srv := s3test.Start(t)
	storetest.Run(t, func(t *testing.T) store.Store { return srv.Store(t, "some/prefix") })
}

func TestS3WrongCredentials(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	cfg := srv.Config(bucket, "v1")
	cfg.Credentials = credentials.NewStaticCredentialsProvider(s3test.AccessKey, "not-the-secret", "")
	st, err := s3store.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = st.Put(context.Background(), "x", bytes.NewReader([]byte("x")), 1, store.PutOptions{})
	if !errors.Is(err, store.ErrAuth) || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
		t.Fatalf("Put with a wrong secret = %v, want ErrAuth with a hint", err)
	}
	_, err = st.Stat(context.Background(), "x")
	if !errors.Is(err, store.ErrAuth) {
		t.Fatalf("Stat with a wrong secret = %v, want ErrAuth", err)
	}
	// versitygw answers an unknown access key id with 404 XAdminUserNotFound (S3 says 403
	// InvalidAccessKeyId); a HEAD has no body to tell that from a missing object, so use a PUT.
	cfg.Credentials = credentials.NewStaticCredentialsProvider("nobody", s3test.SecretKey, "")
	st, _ = s3store.New(context.Background(), cfg)
	err = st.Put(context.Background(), "x", bytes.NewReader([]byte("x")), 1, store.PutOptions{})
	if !errors.Is(err, store.ErrAuth) {
		t.Fatalf("Put with an unknown key id = %v, want ErrAuth", err)
	}
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct{ in, bucket, prefix string }{
		{"s3://b", "b", ""}, {"s3://b/", "b", ""}, {"s3://b/p/q", "b", "p/q"}, {"s3://b/p/q/", "b", "p/q"},
		{"s3:///p", "", ""}, {"http://b/p", "", ""}, {"s3://b/p/../q", "", ""}, {"s3://b/p?x=1", "", ""},
	} {
		b, p, err := s3store.ParseURL(tc.in)
		if tc.bucket == "" {
			if err == nil {
				t.Errorf("ParseURL(%q) = %q, %q; want an error", tc.in, b, p)
			}
			continue
		}
		if err != nil || b != tc.bucket || p != tc.prefix {
			t.Errorf("ParseURL(%q) = %q, %q, %v; want %q, %q", tc.in, b, p, err, tc.bucket, tc.prefix)
		}
	}
}

// A missing bucket is named as such, by Stat too (a HEAD answer cannot say which is missing).
func TestS3MissingBucket(t *testing.T) {
	srv := s3test.Start(t)
	st, err := s3store.New(context.Background(), srv.Config("no-such-bucket", "v1"))
	if err != nil {
		t.Fatal(err)
	}
	want := "bucket no-such-bucket does not exist at " + srv.Endpoint + " (create it first)"
	_, err = st.Stat(context.Background(), "manifest.json")
	if !errors.Is(err, store.ErrNoBucket) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Stat in a missing bucket = %v, want %q", err, want)
	}
	err = st.Put(context.Background(), "x", bytes.NewReader([]byte("x")), 1, store.PutOptions{})
	if !errors.Is(err, store.ErrNoBucket) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Put in a missing bucket = %v, want %q", err, want)
	}
	// In a bucket that exists, a missing key is just that.
	st = srv.Store(t, "v1")
	if _, err := st.Stat(context.Background(), "manifest.json"); !errors.Is(err, store.ErrNotExist) {
		t.Fatalf("Stat of a missing key = %v, want ErrNotExist", err)
	}
}
