package publish

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"pdq/publish/store"
	"pdq/publish/store/s3store"
	"pdq/publish/store/s3store/s3test"
)

// These tests run against a real S3 server (versitygw, see s3test); they skip without VERSITYGW.

func TestMain(m *testing.M) {
	if os.Getenv("PDQ_PUBLISH_HELPER") == "1" {
		os.Exit(publishHelper())
	}
	os.Exit(m.Run())
}

// publishHelper is the child process of TestS3KillResume: it publishes, printing a line after
// each stored part and pausing a little, so that the parent can kill it mid-upload.
func publishHelper() int {
	cfg := s3store.Config{
		Bucket: os.Getenv("PDQ_BUCKET"), Prefix: os.Getenv("PDQ_PREFIX"), Endpoint: os.Getenv("PDQ_ENDPOINT"),
		Region: s3test.Region, Credentials: credentials.NewStaticCredentialsProvider(s3test.AccessKey, s3test.SecretKey, ""),
	}
	st, err := s3store.New(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts := quiet()
	opts.Parallel = 2
	opts.OnPart = func(key string, n int32) {
		fmt.Printf("part %s %d\n", key, n)
		time.Sleep(150 * time.Millisecond)
	}
	if _, err := Publish(context.Background(), st, os.Getenv("PDQ_SRC"), opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type s3Env struct {
	srv            *s3test.Server
	bucket, prefix string
	st             *s3store.Store
}

func newS3(t *testing.T) s3Env {
	srv := s3test.Start(t)
	e := s3Env{srv: srv, bucket: srv.NewBucket(t), prefix: "models/tiny/v1"}
	var err error
	if e.st, err = s3store.New(context.Background(), srv.Config(e.bucket, e.prefix)); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e s3Env) objectPath(key string) string { return e.srv.ObjectPath(e.bucket, e.prefix+"/"+key) }

func TestS3PublishPullRoundTrip(t *testing.T) {
	e := newS3(t)
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	res := roundTrip(t, e.st, src, quiet())
	parts := 0
	for _, f := range res.Files {
		parts += f.PartsSent
	}
	if parts <= len(res.Files) {
		t.Fatalf("%d requests for %d files: nothing went up in parts", parts, len(res.Files))
	}
	// The objects are the files themselves, under their paths in the content's folder.
	b, err := os.ReadFile(e.objectPath(keyIn(t, src, "config.json", false)))
	if err != nil || string(b) != `{"model_type": "test"}`+"\n" {
		t.Fatalf("config.json on the server: %q, %v", b, err)
	}
}

func TestS3CompressRoundTrip(t *testing.T) {
	e := newS3(t)
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "bf16.safetensors"), safetensorsBytes(map[string]tensor{"w": {"BF16", bf16Bytes(3<<20, 7)}}), 0o644)
	os.WriteFile(filepath.Join(src, "fp8.safetensors"), safetensorsBytes(map[string]tensor{"w": {"F8_E4M3", fp8Bytes(6<<20, 8)}}), 0o644)
	os.WriteFile(filepath.Join(src, "int4.safetensors"), safetensorsBytes(map[string]tensor{"w_packed": {"I32", int4Bytes(6<<20, 9)}}), 0o644)
	opts := quiet()
	opts.Compress = true
	res := roundTrip(t, e.st, src, opts)
	for _, f := range res.Files {
		if f.Compression != CompressionZipNN || f.Ratio < 1.05 {
			t.Errorf("%s: %s ratio %.3f", f.Path, f.Compression, f.Ratio)
		}
		t.Logf("%s: %d -> %d bytes, ratio %.3f", f.Path, f.Size, f.StoredSize, f.Ratio)
	}
}

// kill -9 of a publish mid-upload, then a rerun: only the missing parts are sent again.
func TestS3KillResume(t *testing.T) {
	e := newS3(t)
	src := t.TempDir()
	big := bf16Bytes(20<<20, 11) // 40 MiB: 8 parts of 5 MiB
	if err := os.WriteFile(filepath.Join(src, "big.safetensors"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "config.json"), []byte("{}\n"), 0o644)
	const totalParts, killAfter = 8, 3
	bigKey := keyIn(t, src, "big.safetensors", false)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PDQ_PUBLISH_HELPER=1", "PDQ_BUCKET="+e.bucket, "PDQ_PREFIX="+e.prefix,
		"PDQ_ENDPOINT="+e.srv.Endpoint, "PDQ_SRC="+src)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	seen := 0
	for seen < killAfter && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "part "+bigKey+" ") {
			seen++
		}
	}
	cmd.Process.Kill() // SIGKILL
	cmd.Wait()
	if seen < killAfter {
		t.Fatalf("helper stopped after %d parts: %s", seen, stderr.String())
	}
	if _, _, err := ReadManifest(context.Background(), e.st); !errors.Is(err, ErrNotPublished) {
		t.Fatalf("killed publish left a manifest: %v", err)
	}
	ups, err := e.st.ListUploads(context.Background(), bigKey)
	if err != nil || len(ups) != 1 {
		t.Fatalf("uploads in progress after the kill: %v, %v", ups, err)
	}

	h := &hookStore{Store: e.st}
	res, err := Publish(context.Background(), h, src, quiet())
	if err != nil {
		t.Fatal(err)
	}
	var f FileResult
	for _, r := range res.Files {
		if r.Path == "big.safetensors" {
			f = r
		}
	}
	t.Logf("after kill -9 at part %d: rerun kept %d parts, sent %d of %d", seen, f.PartsReused, f.PartsSent, totalParts)
	if f.Action != "resumed" || f.PartsReused < killAfter || f.PartsSent+f.PartsReused != totalParts || h.partsSent != f.PartsSent {
		t.Fatalf("rerun: %+v, %d parts uploaded", f, h.partsSent)
	}
	if ups, _ := e.st.ListUploads(context.Background(), bigKey); len(ups) != 0 {
		t.Fatalf("uploads left after completion: %v", ups)
	}
	outDir := t.TempDir()
	if _, err := Pull(context.Background(), e.st, outDir, PullOptions{Log: discardLog}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, src, outDir)
}

func TestS3CorruptionDetected(t *testing.T) {
	e := newS3(t)
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	if _, err := Publish(context.Background(), e.st, src, quiet()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Bytes damaged in place on the server: the store's metadata cannot see it, reading can.
	flipByte(t, e.objectPath(keyIn(t, src, "model-00001-of-00002.safetensors", false)), 3<<20)
	if res, err := Verify(ctx, e.st, VerifyOptions{}); err != nil {
		t.Logf("quick verify noticed the damage too: %+v", res)
	}
	res, err := Verify(ctx, e.st, VerifyOptions{Deep: true})
	if !errors.Is(err, ErrVerify) || res.Problems != 1 || !strings.Contains(res.Files[indexOf(res, "model-00001-of-00002.safetensors")].Problem, "sha256") {
		t.Fatalf("deep Verify = %+v, %v; want the damaged file", res, err)
	}
	out := t.TempDir()
	if _, err := Pull(ctx, e.st, out, PullOptions{Log: discardLog}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Pull = %v, want ErrCorrupt", err)
	}
	// An object replaced behind our back (another client, no metadata): the quick check sees it.
	if err := e.st.Put(ctx, keyIn(t, src, "config.json", false), strings.NewReader(`{"model_type": "evil"}`+"\n"), 23, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err = Verify(ctx, e.st, VerifyOptions{})
	if !errors.Is(err, ErrVerify) || res.Files[indexOf(res, "config.json")].OK {
		t.Fatalf("quick Verify after a replace = %+v, %v", res, err)
	}
}

func indexOf(res *VerifyResult, path string) int {
	for i, f := range res.Files {
		if f.Path == path {
			return i
		}
	}
	return -1
}

func TestS3SecondPublishRefused(t *testing.T) {
	e := newS3(t)
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	if _, err := Publish(context.Background(), e.st, src, quiet()); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(e.objectPath(ManifestKey))
	if _, err := Publish(context.Background(), e.st, src, quiet()); !errors.Is(err, ErrAlreadyPublished) {
		t.Fatalf("second Publish = %v, want ErrAlreadyPublished", err)
	}
	// A racing publisher that passed the early check is stopped by If-None-Match on the server.
	h := &hookStore{Store: e.st, hideStat: map[string]bool{ManifestKey: true}}
	if _, err := Publish(context.Background(), h, src, quiet()); !errors.Is(err, ErrAlreadyPublished) {
		t.Fatalf("Publish past the early check = %v, want ErrAlreadyPublished", err)
	}
	after, _ := os.ReadFile(e.objectPath(ManifestKey))
	if !bytes.Equal(before, after) {
		t.Fatal("the manifest changed")
	}
}

func TestS3WrongCredentials(t *testing.T) {
	e := newS3(t)
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	cfg := e.srv.Config(e.bucket, e.prefix)
	cfg.Credentials = credentials.NewStaticCredentialsProvider(s3test.AccessKey, "wrong-secret", "")
	st, err := s3store.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Publish(context.Background(), st, src, quiet())
	if !errors.Is(err, store.ErrAuth) || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
		t.Fatalf("Publish with a wrong secret = %v", err)
	}
	t.Logf("error shown: %v", err)
	if _, err := Pull(context.Background(), st, t.TempDir(), PullOptions{}); !errors.Is(err, store.ErrAuth) {
		t.Fatalf("Pull with a wrong secret = %v", err)
	}
}

// Part numbers, sizes and CRCs as the server lists them match what the uploader computed.
func TestS3PartsCarryCRC(t *testing.T) {
	e := newS3(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, bf16Bytes(6<<20, 5), 0o644) // 12 MiB: 3 parts
	s, err := hashFile(context.Background(), p, store.MinPartSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := e.st.CreateMultipart(ctx, "f", store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(p)
	defer f.Close()
	for i := range 2 {
		if _, err := e.st.UploadPart(ctx, "f", id, int32(i+1), io.NewSectionReader(f, int64(i)*s.partSize, s.partLen(i)), s.partLen(i), s.crcs[i]); err != nil {
			t.Fatal(err)
		}
	}
	parts, err := e.st.ListParts(ctx, "f", id)
	if err != nil || len(parts) != 2 {
		t.Fatalf("ListParts = %v, %v", parts, err)
	}
	for i, pt := range parts {
		if !pt.HasCRC32C || pt.CRC32C != s.crcs[i] || pt.Size != s.partLen(i) {
			t.Fatalf("part %d listed as %+v, uploaded with crc %08x size %d", i+1, pt, s.crcs[i], s.partLen(i))
		}
	}
}
