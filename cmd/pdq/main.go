// Command pdq turns a mixture-of-experts checkpoint into an FP8 prefill checkpoint and an INT4
// decode checkpoint, reports the reconstruction error of every tensor, and publishes both.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"pdq/kernels"
)

// version is the tool version recorded in outputs; overridden at link time with -X main.version=.
var version = "0.1.0-dev"

// Exit codes: 0 success, 1 failure, 2 bad usage, 130 interrupted (Ctrl-C or SIGTERM).
const (
	exitFailure = 1
	exitUsage   = 2
	// exitInterrupted is the shell convention for a process stopped by SIGINT.
	exitInterrupted = 130
)

// usageError marks an error caused by how the command was called (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usage error (exit status 2) with a formatted message.
func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// commands lists the constructors of the subcommands; each command file appends its own in init.
var commands []func() *cobra.Command

// globalOptions are the flags every command shares.
type globalOptions struct {
	verbose    bool
	cpuProfile string
	memProfile string
	execTrace  string
}

// stopProfile ends the CPU profile started by --cpuprofile, if any.
var stopProfile = func() {}

var globals globalOptions

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "pdq",
		Short: "Convert MoE checkpoints into FP8 prefill and INT4 decode checkpoints",
		Long: `pdq turns a large mixture-of-experts checkpoint (safetensors, BF16 or FP8 blocks) into two
serving checkpoints in one streaming pass:

  prefill/  FP8 e4m3 with 128x128 block scales (an FP8 source passes through bit-exact)
  decode/   routed experts as group-wise INT4 (compressed-tensors pack-quantized), the rest BF16

and writes a per-tensor error report computed from the bytes actually written.`,
		Example: `  pdq testdata gen --out /tmp/tiny --fp8    # a small synthetic FP8 MoE checkpoint
  pdq inspect /tmp/tiny                      # what is in it
  pdq plan /tmp/tiny                         # what convert will write, exact sizes
  pdq convert /tmp/tiny --out /tmp/pd        # /tmp/pd/prefill, /tmp/pd/decode, /tmp/pd/report.json
  pdq verify /tmp/tiny /tmp/pd/decode        # independent re-check of the output
  pdq report /tmp/pd --html /tmp/pd/report.html
  pdq publish /tmp/pd/decode s3://bucket/tiny/decode/v1`,
		Version:       version + " (CPU kernels: " + kernels.SIMD() + ")",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, args []string) {
			level := slog.LevelWarn
			if globals.verbose {
				level = slog.LevelDebug
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(logWriter{cmd.ErrOrStderr()}, &slog.HandlerOptions{Level: level})))
			if globals.cpuProfile != "" || globals.memProfile != "" || globals.execTrace != "" {
				startProfile(globals.cpuProfile, globals.memProfile, globals.execTrace)
			}
		},
	}
	root.PersistentFlags().BoolVarP(&globals.verbose, "verbose", "v", false, "log progress details to stderr")
	root.PersistentFlags().StringVar(&globals.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the command to this file (for go tool pprof)")
	_ = root.PersistentFlags().MarkHidden("cpuprofile")
	root.PersistentFlags().StringVar(&globals.memProfile, "memprofile", "", "write a Go allocation profile of the command to this file at exit (for go tool pprof -sample_index=alloc_space)")
	_ = root.PersistentFlags().MarkHidden("memprofile")
	root.PersistentFlags().StringVar(&globals.execTrace, "exectrace", "", "write a Go execution trace of the command to this file (for go tool trace)")
	_ = root.PersistentFlags().MarkHidden("exectrace")
	root.SetFlagErrorFunc(flagError)
	for _, mk := range commands {
		root.AddCommand(mk())
	}
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Example = `  source <(pdq completion bash)                             # this shell
  pdq completion bash > /etc/bash_completion.d/pdq          # every bash
  pdq completion zsh > "${fpath[1]}/_pdq"                   # zsh
  pdq completion fish > ~/.config/fish/completions/pdq.fish # fish`
		}
	}
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, newRootCmd(), os.Stderr)
	stop()
	os.Exit(code)
}

// execute runs root as the process does and returns its exit status; a failure is one message on
// stderr that names the command the user ran.
func execute(ctx context.Context, root *cobra.Command, stderr io.Writer) int {
	cmd, err := root.ExecuteContextC(ctx)
	stopProfile()
	if err == nil {
		return 0
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Short enough for an 80-column terminal; nothing unfinished is under a final name.
		fmt.Fprintf(stderr, "%s: interrupted; rerun the same command to resume\n", cmd.CommandPath())
		return exitInterrupted
	}
	fmt.Fprintln(stderr, errorLine(cmd, err))
	if h := hintForCommand(cmd.Name(), err); h != "" {
		fmt.Fprintln(stderr, "hint:", h)
	}
	var ue usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		return exitUsage
	}
	return exitFailure
}

// startProfile starts a CPU profile into cpuPath and an execution trace into tracePath (either
// may be empty); a failure to start one is logged, not fatal.
func startProfile(cpuPath, memPath, tracePath string) {
	stopCPU := startRecording(cpuPath, "cpu profile", pprof.StartCPUProfile, pprof.StopCPUProfile)
	stopTrace := startRecording(tracePath, "execution trace", trace.Start, trace.Stop)
	stopProfile = func() {
		stopCPU()
		stopTrace()
		if memPath != "" {
			writeHeapProfile(memPath)
		}
	}
}

// startRecording creates path and starts a recording into it with start; the function it
// returns stops the recording and closes the file. An empty path records nothing.
func startRecording(path, what string, start func(io.Writer) error, stop func()) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		if err = start(f); err != nil {
			_ = f.Close()
		}
	}
	if err != nil {
		slog.Warn(what+" not written", "path", path, "err", err)
		return func() {}
	}
	return func() {
		stop()
		if err := f.Close(); err != nil {
			slog.Warn(what+" incomplete", "path", path, "err", err)
		}
	}
}

// writeHeapProfile writes the allocation profile (every allocation since the start) to path.
func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		slog.Warn("allocation profile not written", "path", path, "err", err)
	}
}

// isCobraUsage recognises cobra's own argument errors (unknown command, unknown flag). They
// are never wrapped, so only their start is compared: an operating-system error such as
// "write ...: invalid argument" is a failure, not bad usage.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "invalid argument", "accepts ", "requires "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
