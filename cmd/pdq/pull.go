package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"pdq/publish"
)

func init() { commands = append(commands, newPullCmd) }

func newPullCmd() *cobra.Command {
	var o storeFlags
	cmd := &cobra.Command{
		Use:   "pull URL DIR",
		Short: "Download a published version into a directory, verifying every file",
		Long: `pull reads URL/manifest.json and downloads every file into DIR with parallel ranged reads,
checks each against the manifest's SHA-256 (decompressing files published with --compress to
their exact original bytes), and gives the files their final names only once every one of them
verifies (the safetensors index last). Files already in DIR with the right SHA-256 are kept;
anything else in the way is listed and nothing is downloaded. A pull that does not fit in DIR's
free space is refused before it starts. Run again after an interruption and it resumes from
the ranges already written (kept in DIR/.pdq-pull until the pull completes). A manifest path
that would leave DIR is refused.

An S3 request that sends and receives nothing for --timeout fails (tried 3 times), so a server
that stops answering fails the pull within about three timeouts; rerun it to resume. Outside a
terminal a progress line is printed every --progress-interval.`,
		Example: `  pdq pull s3://models/glm5/decode/v1 /data/glm5-decode
  pdq pull s3://bucket/v1 out --endpoint http://127.0.0.1:7070 --parallel 16
  pdq pull /srv/published/tiny/v1 /tmp/tiny-copy --json
  pdq pull s3://bucket/v1 out --timeout 2m --progress-interval 30s 2>pull.log`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(); err != nil {
				return err
			}
			return runPull(cmd.Context(), cmd.OutOrStdout(), args[0], args[1], o)
		},
	}
	o.add(cmd)
	return cmd
}

func runPull(ctx context.Context, w io.Writer, url, dir string, o storeFlags) error {
	if publish.IsStoreURL(dir) {
		return usagef("DIR %s is a URL: pull downloads into a local directory (for one whose name has a colon write ./%s)", publish.Quote(dir), dir)
	}
	st, err := o.open(ctx, url)
	if err != nil {
		return err
	}
	prog := o.progress("pull")
	opts := publish.PullOptions{Parallel: o.parallel, PartSize: o.partSize}
	if prog != nil {
		opts.Progress = prog
	}
	res, err := publish.Pull(ctx, st, dir, opts)
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
		how := formatBytes(f.Size)
		if f.Compression != publish.CompressionNone {
			how = fmt.Sprintf("%s (from %s %s)", how, formatBytes(f.StoredSize), f.Compression)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Action, publish.Quote(f.Path), how)
	}
	tw.Flush()
	fmt.Fprintf(w, "pulled %d files, %s (downloaded %s in %.1fs) into %s; every SHA-256 matches the manifest\n",
		len(res.Files), formatBytes(res.Size), formatBytes(res.BytesDownloaded), res.Seconds, publish.Quote(dir))
	return nil
}
