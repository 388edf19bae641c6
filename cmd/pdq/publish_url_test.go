package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pdq/publish"
)

// A destination that starts like a URL but is not a well-formed one is refused (exit 2) with the
// spelling it probably meant, and nothing is written: never a local folder named "s3:".
func TestPublishRefusesMalformedURL(t *testing.T) {
	decode := pubTestDir(t)
	cwd := t.TempDir()
	t.Chdir(cwd)
	for _, tc := range []struct{ url, want string }{
		{"s3:/bucket/x", "did you mean s3://bucket/x?"},
		{"s3:bucket/x", "did you mean s3://bucket/x?"},
		{"S3:/bucket/x", "did you mean s3://bucket/x?"},
		{"s3:///x", "names no bucket"},
		{"file:/srv/v1", "did you mean file:///srv/v1?"},
		{"file:rel/v1", "did you mean file:///rel/v1?"},
		{"file://host/srv/v1", "want file:///absolute/path"},
		{"gs://bucket/x", "unsupported scheme gs:"},
		{"https://host/bucket/x", "unsupported scheme https:"},
		{"hf:org/model", "unsupported scheme hf:"},
	} {
		err := runPublish(context.Background(), new(bytes.Buffer), decode, tc.url, pubFlags())
		var ue usageError
		if !errors.Is(err, publish.ErrBadURL) || !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("publish to %q: %v, want a usage error saying %q", tc.url, err, tc.want)
		}
		err = runPull(context.Background(), new(bytes.Buffer), tc.url, filepath.Join(cwd, "pulled"), pubFlags().storeFlags)
		if !errors.Is(err, publish.ErrBadURL) {
			t.Errorf("pull from %q: %v, want ErrBadURL", tc.url, err)
		}
		if !isStoreURL(tc.url) {
			t.Errorf("verify takes %q for a local checkpoint", tc.url)
		}
		err = runVerifyRemote(context.Background(), new(bytes.Buffer), tc.url, remoteVerifyOptions{})
		if !errors.Is(err, publish.ErrBadURL) || !errors.As(err, &ue) {
			t.Errorf("verify %q: %v, want a usage error", tc.url, err)
		}
		err = runPull(context.Background(), new(bytes.Buffer), filepath.Join(cwd, "nothing"), tc.url, pubFlags().storeFlags)
		if !errors.As(err, &ue) {
			t.Errorf("pull into %q: %v, want a usage error", tc.url, err)
		}
	}
	if ents, _ := os.ReadDir(cwd); len(ents) != 0 {
		t.Errorf("malformed URLs left %v in the working directory", ents)
	}
	// A plain path, relative or absolute, and one written ./ with a colon stay directories.
	for _, p := range []string{"plain/v1", "./odd:name/v1", filepath.Join(cwd, "abs:v1")} {
		if err := runPublish(context.Background(), new(bytes.Buffer), decode, p, pubFlags()); err != nil {
			t.Errorf("publish to %q: %v", p, err)
		}
	}
}

// --report names the report.json pdq convert wrote: another file (a config.json given by
// mistake) is refused (exit 2) before anything is sent, as is such a file found next to DIR.
func TestPublishRefusesNonReport(t *testing.T) {
	decode := pubTestDir(t)
	dst := filepath.Join(t.TempDir(), "v1")
	o := pubFlags()
	o.report = filepath.Join(decode, "config.json")
	err := runPublish(context.Background(), new(bytes.Buffer), decode, dst, o)
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "not a pdq report") {
		t.Errorf("--report config.json: %v, want a usage error saying it is not a pdq report", err)
	}
	if _, err := os.Stat(filepath.Join(dst, publish.ManifestKey)); err == nil {
		t.Error("published anyway")
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(decode), "report.json"), []byte(`{"model_type":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	err = runPublish(context.Background(), new(bytes.Buffer), decode, dst, pubFlags())
	if err == nil || !strings.Contains(err.Error(), "not a pdq report") || !strings.Contains(err.Error(), `--report ""`) {
		t.Errorf("auto report that is not one: %v", err)
	}
}
