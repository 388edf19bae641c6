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
	"time"

	"github.com/spf13/cobra"

	"pdq/publish"
	"pdq/publish/store"
	"pdq/reportview"
)

func init() { commands = append(commands, newPublishCmd) }

// storeFlags are the flags that reach an object store.
type storeFlags struct {
	endpoint, region string
	parallel         int
	partSize         int64
	timeout          time.Duration
	progressEvery    time.Duration
	quiet, asJSON    bool
}

func (f *storeFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.endpoint, "endpoint", "", "S3 endpoint URL, e.g. http://127.0.0.1:7070 (default $AWS_ENDPOINT_URL; path-style addressing)")
	fl.StringVar(&f.region, "region", "", "S3 region (default $AWS_REGION or the profile's, else us-east-1)")
	fl.IntVar(&f.parallel, "parallel", publish.DefaultParallel, "requests in flight")
	f.partSize = publish.DefaultPartSize
	fl.Var(bytesValue{&f.partSize}, "part-size", "size of each uploaded part or downloaded range (at least 5MiB)")
	fl.DurationVar(&f.timeout, "timeout", publish.DefaultTimeout, "S3: fail a request that sends and receives nothing for this long (tried 3 times; 0: wait forever)")
	fl.DurationVar(&f.progressEvery, "progress-interval", defaultProgressEvery, "when stderr is not a terminal, print a progress line this often (0: none)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print nothing but errors")
	fl.BoolVar(&f.asJSON, "json", false, "print a JSON summary on stdout")
}

func (f *storeFlags) check() error {
	if f.parallel < 1 || f.parallel > 256 {
		return usagef("--parallel %d: want 1..256", f.parallel)
	}
	if f.progressEvery < 0 {
		return usagef("--progress-interval %s: want a duration such as 10s, or 0 for none", f.progressEvery)
	}
	if f.timeout < 0 {
		return usagef("--timeout %s: want a duration such as 30s or 2m, or 0 for none", f.timeout)
	}
	if f.partSize < store.MinPartSize {
		return usagef("--part-size %s: at least %s", formatBytes(f.partSize), formatBytes(store.MinPartSize))
	}
	return nil
}

func (f *storeFlags) open(ctx context.Context, url string) (store.Store, error) {
	timeout := f.timeout
	if timeout == 0 {
		timeout = -1 // none
	}
	st, err := publish.OpenStore(ctx, url, publish.StoreOptions{Endpoint: f.endpoint, Region: f.region, MaxConns: f.parallel, Timeout: timeout})
	if errors.Is(err, publish.ErrBadURL) {
		return nil, usageError{err}
	}
	return st, err
}

// progress returns the progress of a transfer on stderr: a bar when it is a terminal, else a
// plain line every --progress-interval; nil with --quiet.
func (f *storeFlags) progress(label string) *byteProgress {
	if f.quiet {
		return nil
	}
	return stderrProgress(label, f.progressEvery)
}

// publishOptions are the flags of pdq publish.
type publishOptions struct {
	storeFlags
	source   string
	report   string
	compress bool
}

func newPublishCmd() *cobra.Command {
	var o publishOptions
	cmd := &cobra.Command{
		Use:   "publish DIR URL",
		Short: "Upload a checkpoint directory to an object store as an immutable version",
		Long: `publish uploads every file of DIR under URL (s3://bucket/prefix, file:///path or a directory),
in a folder URL/data/FOLDER/ of this publish's own (named by the files' identities on this host,
so it is known before a byte is read), then writes URL/manifest.json last (path, size and SHA-256
of every file, tool version, source, creation time) on the condition that none exists: a version
is published once and never overwritten, and of two publishes to one version exactly one
succeeds. Names pull could not restore are refused first.

Each file is read once: its parts are read in order into memory (--parallel buffers of
--part-size), hashed there (SHA-256 of the file, CRC32C of the part) and sent, --parallel at a
time. Run again after an interruption and it resumes in the same folder, sending only the parts
the store lacks. The report (DIR/report.json, or the
report.json next to DIR that pdq convert writes) is published with the checkpoint.

--compress stores safetensors files losslessly compressed (ZipNN-style: BF16 exponents, FP8 and
INT4 bytes Huffman-coded); pdq pull restores the exact original bytes.

DIR is one checkpoint (pdq convert's OUT/prefill or OUT/decode), never the conversion's top
folder OUT. URL is s3://bucket/prefix, file:///absolute/path or a directory; anything else that
starts like a URL (s3:/bucket, file:relative, gs://...) is refused.

An S3 request that sends and receives nothing for --timeout fails (tried 3 times), so a server
that stops answering fails the publish within about three timeouts; rerun it to resume. Outside
a terminal a progress line is printed every --progress-interval.

Credentials and region follow the AWS conventions (AWS_ACCESS_KEY_ID, AWS_PROFILE, ...).`,
		Example: `  pdq publish /data/glm5-pd/decode s3://models/glm5/decode/v1 --source hf://zai-org/GLM-5-FP8
  pdq publish out/decode s3://bucket/v1 --endpoint http://127.0.0.1:7070 --compress
  pdq publish /tmp/tiny/decode /srv/published/tiny/v1 --json`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(); err != nil {
				return err
			}
			return runPublish(cmd.Context(), cmd.OutOrStdout(), args[0], args[1], o)
		},
	}
	o.storeFlags.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&o.source, "source", "", "what the checkpoint was made from, recorded in the manifest (e.g. hf://org/model@rev)")
	fl.StringVar(&o.report, "report", "auto", `report file to publish as report.json ("auto": DIR/../report.json when DIR has none; "" for none)`)
	fl.BoolVar(&o.compress, "compress", false, "store safetensors files losslessly compressed (zipnn)")
	return cmd
}

// findReport resolves --report: "auto" picks the report pdq convert writes next to DIR.
func findReport(dir, flag string) string {
	if flag != "auto" {
		return flag
	}
	if _, err := os.Stat(filepath.Join(dir, publish.ReportName)); err == nil {
		return "" // published with the directory anyway
	}
	p := filepath.Join(filepath.Dir(filepath.Clean(dir)), publish.ReportName)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
		return p
	}
	return ""
}

// checkReport resolves --report and refuses a file that is not a report pdq convert wrote (a
// config.json given by mistake would be published as the version's report.json).
func checkReport(dir, flag string) (string, error) {
	report := findReport(dir, flag)
	if report == "" {
		return "", nil
	}
	_, err := reportview.Load(report)
	switch {
	case err == nil:
		return report, nil
	case !errors.Is(err, reportview.ErrFormat):
		return "", err
	case flag == "auto":
		return "", fmt.Errorf("publish: %s, next to %s, is not a pdq report (%w); name the report with --report FILE, or publish none with --report \"\"", publish.Quote(report), publish.Quote(dir), err)
	}
	return "", usagef("--report %s: %w; give the report.json pdq convert wrote, or --report \"\" for none", publish.Quote(flag), err)
}

func runPublish(ctx context.Context, w io.Writer, dir, url string, o publishOptions) error {
	st, err := o.open(ctx, url)
	if err != nil {
		return err
	}
	report, err := checkReport(dir, o.report)
	if err != nil {
		return err
	}
	prog := o.progress("publish")
	opts := publish.Options{
		Source: o.source, ToolVersion: version, Parallel: o.parallel, PartSize: o.partSize,
		Compress: o.compress, Report: report, SumsRecord: publish.DefaultSumsRecord(dir),
	}
	if prog != nil {
		opts.Progress = prog
	}
	res, err := publish.Publish(ctx, st, dir, opts)
	prog.finish()
	if err != nil {
		return err
	}
	switch {
	case o.asJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	case o.quiet:
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range res.Files {
		how := ""
		if f.Compression != publish.CompressionNone {
			how = fmt.Sprintf("%s -> %s (%s %.3fx)", formatBytes(f.Size), formatBytes(f.StoredSize), f.Compression, f.Ratio)
		} else {
			how = formatBytes(f.Size)
		}
		parts := ""
		if f.PartsReused > 0 {
			parts = fmt.Sprintf("%d parts kept, %d sent", f.PartsReused, f.PartsSent)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Action, publish.Quote(f.Path), how, parts)
	}
	tw.Flush()
	fmt.Fprintf(w, "published %d files, %s (stored %s, sent %s in %.1fs, %s/s) to %s\n",
		len(res.Files), formatBytes(res.Size), formatBytes(res.StoredSize), formatBytes(res.BytesSent),
		res.Seconds, formatBytes(int64(float64(res.BytesSent)/max(res.Seconds, 1e-3))), publish.Quote(res.URL))
	return nil
}
