// Package s3test runs a real S3 server for tests: versitygw (Apache-2.0, pure Go) serving a
// temporary directory on a free loopback port. The environment variable VERSITYGW names the
// binary; without it tests skip, except under CI=true, where they fail.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"pdq/publish/store/s3store"
)

// Credentials the server accepts.
const (
	AccessKey = "pdqtestkey"
	SecretKey = "pdqtestsecret"
	Region    = "us-east-1"
)

// Server is a running versitygw.
type Server struct {
	// Endpoint is the server's URL, http://127.0.0.1:PORT.
	Endpoint string
	// Dir is the directory it serves: bucket B, key K is the file Dir/B/K.
	Dir string

	proc *os.Process
}

// Start runs a server for the rest of the test and stops it (by PID) in t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := os.Getenv("VERSITYGW")
	if bin == "" {
		msg := "VERSITYGW is not set: S3 tests need a versitygw v1.8.0 binary " +
			"(CGO_ENABLED=0 GOBIN=DIR go install github.com/versity/versitygw/cmd/versitygw@v1.8.0; export VERSITYGW=DIR/versitygw)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	for try := 0; ; try++ {
		addr := freePort(t)
		cmd := exec.Command(bin, "--port", addr, "--access", AccessKey, "--secret", SecretKey, "--quiet", "posix", dir)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("s3test: start %s: %v", bin, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if waitListening(addr, exited, 10*time.Second) {
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
			})
			return &Server{Endpoint: "http://" + addr, Dir: dir, proc: cmd.Process}
		}
		cmd.Process.Kill()
		<-exited
		if try == 2 {
			t.Fatalf("s3test: versitygw did not start on %s: %s", addr, out.String())
		}
	}
}

func freePort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitListening(addr string, exited <-chan error, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// Config returns the s3store configuration of bucket/prefix on this server, with explicit
// credentials so that no environment or profile of the machine leaks in.
func (s *Server) Config(bucket, prefix string) s3store.Config {
	return s3store.Config{
		Bucket: bucket, Prefix: prefix, Endpoint: s.Endpoint, Region: Region,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	}
}

// NewBucket creates a bucket with a fresh name and returns the name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	name := "pdq-" + hex.EncodeToString(b[:])
	cfg := s.Config(name, "")
	client := s3.New(s3.Options{
		Region: Region, BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true, Credentials: cfg.Credentials,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("s3test: create bucket: %v", err)
	}
	return name
}

// Store returns a store on a new bucket of this server, rooted at prefix.
func (s *Server) Store(t testing.TB, prefix string) *s3store.Store {
	t.Helper()
	st, err := s3store.New(context.Background(), s.Config(s.NewBucket(t), prefix))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// ObjectPath returns the file that holds bucket/key on disk (for tests that damage objects).
func (s *Server) ObjectPath(bucket, key string) string {
	return filepath.Join(s.Dir, bucket, filepath.FromSlash(key))
}

// SetEnv points the AWS environment variables at this server for the rest of the test.
func (s *Server) SetEnv(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", Region)
	t.Setenv("AWS_ENDPOINT_URL", s.Endpoint)
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(s.Dir, "no-aws-config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(s.Dir, "no-aws-credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}
