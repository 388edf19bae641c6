package main

import (
	"errors"

	"pdq/publish"
	"pdq/publish/store"
	"pdq/quantize"
	"pdq/quantize/compare"
	"pdq/quantize/convert"
	"pdq/quantize/engines"
)

// hint is what the user can do about a sentinel error, in terms of the command line's flags.
type hint struct {
	err  error
	hint string
}

// hints say, for the library's sentinel errors, what the user can do about them in terms of
// this command line's flags; the library's messages name no flags.
var hints = []hint{
	{convert.ErrNotEmpty, "DIR holds no conversion journal, so there is nothing to resume: choose another --out, or --force to delete prefill/, decode/ and report.json there and start over"},
	{convert.ErrNothingToResume, "there is nothing to continue: choose an empty or new --out (without --resume), or --force to delete prefill/, decode/ and report.json there and start over"},
	{convert.ErrInsideOutput, "choose an --out beside that conversion's directory, not inside it"},
	{convert.ErrOtherPlan, "rerun with the options the conversion was started with, or --force to start over (a part: remove DIR yourself)"},
	{convert.ErrBadJournal, "delete the journal file named above, or use --force to start over"},
	{convert.ErrSplitDir, "finish it with --merge after every part, continue it with --part I/N, or --force to start over"},
	{convert.ErrLinkOutside, "replace the link by a copy of the file, or give the model's configuration with --config FILE"},
	{convert.ErrPackedSource, "the source's already-quantized tensors named above do not fit their format (docs/FP4.md lists the layouts pdq reads): the download is damaged or incomplete (fetch it again), or the checkpoint was written by a tool pdq does not read: convert from the model's BF16 or FP8 original"},
	{quantize.ErrBadScale, "a block scale of the FP8 source is zero or not finite: a header-only checkpoint from pdq testdata gen holds no values (it is for pdq plan only); any other source is damaged there (fetch it again)"},
	{errNoSpace, "free some space there or give an --out on a larger disk (pdq plan SRC shows each output's size)"},
	{convert.ErrOverlapsSource, "choose an --out outside the source that does not contain it"},
	{convert.ErrQuantizedSource, "pdq reads " + convert.SourcesRead + "; no option reads other quantizations: give the model's original in one of those as SRC (pdq inspect SRC names a checkpoint's layout)"},
	{convert.ErrUnsupported, "use --on-unsupported skip to keep such modules dense (they are listed in the report)"},
	{engines.ErrNoConfig, "the engines build the model from config.json: put the model's config.json beside the weights (pdq convert --config FILE writes it into its outputs)"},
	{convert.ErrNoTargets, "fix --targets (pdq inspect SRC lists the modules), or give --decode-without-int4 to accept a decode checkpoint with no module in the decode format"},
	{convert.ErrBusy, "wait for that run to finish (or stop it); a crashed run holds no lock, so a rerun after a crash is never refused"},
	{convert.ErrSourceChanged, "rerun once nothing writes to SRC; while a prefill copy is cloned, a hard link or chmod of its shard counts as a change too (--prefill-mode write writes the copy and checks only size and modification time)"},
	{publish.ErrConversionTop, "publish DIR/prefill and DIR/decode to two versions, e.g. URL/prefill and URL/decode"},
	{store.ErrStalled, "check the server and the network, then rerun the same command: it resumes where it stopped (the timeout option of pdq publish and pull sets how long a silent request is waited for)"},
	{store.ErrUnreachable, "check the endpoint's address and that the server runs, then rerun the same command: it resumes where it stopped"},
	{convert.ErrPartsIncomplete, "run the parts named above (pdq plan SRC --parts N lists what each writes), then --merge again"},
}

// commandHints are hints that depend on the command that failed, tried before hints.
var commandHints = []struct {
	cmd  string
	err  error
	hint string
}{
	{"verify", convert.ErrQuantizedSource, "the arguments are SRC (the checkpoint that was converted) then the output: pdq verify SRC DIR/decode"},
	{"compare", compare.ErrNoModules, "--layers or --sample chose no target module, or --targets matches none: the first dense layers have no routed experts (pdq inspect SRC lists the modules)"},
	{"compare", convert.ErrNoTargets, "fix --targets (pdq inspect SRC lists the modules)"},
	{"compare", compare.ErrUnfit, "drop that format from --formats, or keep such modules out with --ignore"},
	{"verify", convert.ErrNotOutput, "the arguments are SRC (the checkpoint that was converted) then the output: pdq verify SRC DIR/decode"},
}

// hintForCommand returns the hint for err failing the command named cmd, or "".
func hintForCommand(cmd string, err error) string {
	for _, h := range commandHints {
		if h.cmd == cmd && errors.Is(err, h.err) {
			return h.hint
		}
	}
	return hintFor(err)
}

// formatHints are the hints for the decode formats' refusals of a module's shape (their
// FormatInfo.Refusal, which wraps convert.ErrUnsupported: tried before hints).
func formatHints() []hint {
	var out []hint
	for _, f := range convert.Formats() {
		if f.Refusal != nil {
			out = append(out, hint{f.Refusal, f.RefusedBy + " take only such shapes (docs/FP4.md): choose another --decode-format (int4 runs on the same GPUs), or --on-unsupported skip to keep such modules dense (they are listed in the report)"})
		}
	}
	return out
}

// hintFor returns the hint for err, or "".
func hintFor(err error) string {
	for _, h := range append(formatHints(), hints...) {
		if errors.Is(err, h.err) {
			return h.hint
		}
	}
	return ""
}
