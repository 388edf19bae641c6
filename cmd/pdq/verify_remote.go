package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"pdq/publish"
)

// remoteVerifyOptions are what pdq verify URL needs.
type remoteVerifyOptions struct {
	Deep             bool
	JSON             bool
	Endpoint, Region string
}

// isStoreURL reports whether a verify argument names a published version (s3://, file://, or a
// plain path of a local store: a directory holding a manifest.json) rather than a local
// checkpoint directory.
func isStoreURL(arg string) bool {
	if publish.IsStoreURL(arg) {
		return true
	}
	fi, err := os.Stat(filepath.Join(arg, publish.ManifestKey))
	return err == nil && fi.Mode().IsRegular()
}

// runVerifyRemote checks the version at url against its manifest and prints one line per file
// (or JSON); it returns an error when anything does not match.
func runVerifyRemote(ctx context.Context, w io.Writer, url string, opts remoteVerifyOptions) error {
	st, err := publish.OpenStore(ctx, url, publish.StoreOptions{Endpoint: opts.Endpoint, Region: opts.Region, MaxConns: publish.DefaultParallel})
	if errors.Is(err, publish.ErrBadURL) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	var prog *byteProgress
	vo := publish.VerifyOptions{Deep: opts.Deep}
	if opts.Deep {
		if prog = stderrProgress("verify", defaultProgressEvery); prog != nil {
			vo.Progress = prog
		}
	}
	res, err := publish.Verify(ctx, st, vo)
	prog.finish()
	if res == nil {
		return err
	}
	if opts.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(res); jerr != nil {
			return jerr
		}
		return err
	}
	how := "sizes and stored checksums"
	if opts.Deep {
		how = "every byte"
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range res.Files {
		verdict := "ok"
		if !f.OK {
			verdict = "FAIL  " + f.Problem
		}
		fmt.Fprintf(tw, "%s\t%s\n", publish.Quote(f.Path), verdict)
	}
	tw.Flush()
	if err != nil {
		if errors.Is(err, publish.ErrVerify) {
			fmt.Fprintf(w, "%d of %d files do not match the manifest of %s (checked %s)\n", res.Problems, len(res.Files), publish.Quote(res.URL), how)
		}
		return err
	}
	fmt.Fprintf(w, "%d files match the manifest of %s (checked %s)\n", len(res.Files), publish.Quote(res.URL), how)
	return nil
}
