package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pdq/publish"
	"pdq/publish/store/s3store/s3test"
)

// pubTestDir writes a small converted-looking tree: OUT/decode with files and OUT/report.json.
func pubTestDir(t *testing.T) (decode string) {
	t.Helper()
	out := t.TempDir()
	decode = filepath.Join(out, "decode")
	files := map[string]string{
		"decode/config.json":       `{"a":1}`,
		"decode/model.safetensors": "\x10\x00\x00\x00\x00\x00\x00\x00{}              " + strings.Repeat("w", 1000),
		"report.json":              `{"tensors":[]}`,
	}
	for name, body := range files {
		p := filepath.Join(out, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return decode
}

func pubFlags() publishOptions {
	return publishOptions{storeFlags: storeFlags{parallel: 4, partSize: 5 << 20, timeout: publish.DefaultTimeout, asJSON: true}, source: "test://src", report: "auto"}
}

// pubCycle publishes, verifies (quick and deep) and pulls through the command functions.
func pubCycle(t *testing.T, decode, url string, o publishOptions) {
	t.Helper()
	ctx := context.Background()
	var out bytes.Buffer
	if err := runPublish(ctx, &out, decode, url, o); err != nil {
		t.Fatal(err)
	}
	var res publish.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("publish --json: %v\n%s", err, out.String())
	}
	if res.Manifest.Report != "report.json" || res.Manifest.Source != "test://src" || res.Manifest.ToolVersion != version || len(res.Files) != 3 {
		t.Fatalf("manifest %+v", res.Manifest)
	}
	for _, deep := range []bool{false, true} {
		out.Reset()
		if err := runVerifyRemote(ctx, &out, url, remoteVerifyOptions{Deep: deep}); err != nil {
			t.Fatalf("verify (deep=%v): %v\n%s", deep, err, out.String())
		}
		if !strings.Contains(out.String(), "3 files match the manifest") {
			t.Fatalf("verify output:\n%s", out.String())
		}
	}
	dst := filepath.Join(t.TempDir(), "copy")
	out.Reset()
	if err := runPull(ctx, &out, url, dst, o.storeFlags); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"config.json", "model.safetensors", "report.json"} {
		want, _ := os.ReadFile(filepath.Join(decode, name))
		if name == "report.json" {
			want, _ = os.ReadFile(filepath.Join(filepath.Dir(decode), name))
		}
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("pulled %s differs: %v", name, err)
		}
	}
	out.Reset()
	err := runPublish(ctx, &out, decode, url, o)
	if !errors.Is(err, publish.ErrAlreadyPublished) {
		t.Fatalf("second publish: %v", err)
	}
}

func TestPublishCommandsLocal(t *testing.T) {
	decode := pubTestDir(t)
	pubCycle(t, decode, "file://"+filepath.ToSlash(filepath.Join(t.TempDir(), "v1")), pubFlags())
	pubCycle(t, decode, filepath.Join(t.TempDir(), "plain-path"), pubFlags())
}

// The AWS environment alone (AWS_ENDPOINT_URL, keys, region) is enough to reach the server.
func TestPublishCommandsS3Env(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	srv.SetEnv(t)
	o := pubFlags()
	o.compress = true
	pubCycle(t, pubTestDir(t), "s3://"+bucket+"/tiny/v1", o)
}

func TestPublishCommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{"publish", "onlyone"},
		{"publish", "a", "b", "c"},
		{"publish", "a", "s3://b/v1", "--part-size", "1MiB"},
		{"publish", "a", "s3://b/v1", "--parallel", "0"},
		{"pull", "s3://b/v1"},
		{"pull", "s3://b/v1", "dir", "--part-size", "lots"},
		{"pull", "s3://b/v1", "dir", "--timeout", "-1s"},
		{"publish", "a", "s3://b/v1", "--progress-interval", "-5s"},
	} {
		root := newRootCmd()
		root.SetArgs(args)
		root.SetOut(new(bytes.Buffer))
		root.SetErr(new(bytes.Buffer))
		err := root.Execute()
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error (exit 2)", args, err)
		}
	}
	if !isStoreURL("s3://b/p") || !isStoreURL("file:///x") || isStoreURL("/data/ckpt") || isStoreURL("rel/dir") {
		t.Error("isStoreURL")
	}
}
