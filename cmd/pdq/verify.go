package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"pdq/quantize/convert"
	"pdq/quantize/report"
	"pdq/reportview"
	"pdq/safetensors"
)

func init() { commands = append(commands, newVerifyCmd) }

// verifyOptions are the flags of pdq verify.
type verifyOptions struct {
	asJSON   bool
	workers  int
	deep     bool
	endpoint string
	region   string
	engine   string // --engine: check DIR against the serving engines' loading rules
	tp       int
	gpu      string // --gpu: the serving GPU, for the formats' GPU rules
}

func newVerifyCmd() *cobra.Command {
	var o verifyOptions
	cmd := &cobra.Command{
		Use:   "verify SRC DIR/decode | verify SRC DIR/prefill | verify URL",
		Short: "Check a converted checkpoint against its source, or a published one against its manifest",
		Long: `With a source and an output directory, verify re-reads both, independently of the convert run:
the output's headers and index must be complete and consistent (every tensor once), it must hold
exactly the tensors and config.json that a conversion with the same options gives, copied tensors
must be byte-identical, and the error metrics of every quantized tensor are recomputed from the
written bytes and compared with report.json when it is there.

With one URL (s3://bucket/prefix or file:///path), verify checks a published version against its
manifest: sizes and stored checksums where the store can answer, every byte with --deep.

` + wrapText(`With --engine sglang|vllm|all and one DIR, verify applies the serving engines' loading rules
(written from their source, cited in docs/SERVING.md) to config.json and the tensor headers:
every module an engine would refuse or mis-load is named with the rule and its source, and the
launch flags the checkpoint needs are listed. For the routed experts' format (`+formatTitles()+`) it prints which GPU generations each engine loads it on, or with --gpu refuses it where
that GPU cannot.`, 97) + `

Exit status 1 when anything is wrong; every problem is listed.`,
		Example: `  pdq verify /models/GLM-5-FP8 /data/glm5-pd/decode
  pdq verify /models/GLM-5-FP8 /data/glm5-pd/prefill --json
  pdq verify s3://models/glm5/v1/decode --deep
  pdq verify --engine sglang --tp 8 /data/glm5-pd          # both outputs, SGLang's rules
  pdq verify --engine all /data/glm5-pd/decode --json
  pdq verify --engine vllm --gpu h200 --tp 8 /data/k2-` + string(exampleFormat().Format) + `/decode   # ` + exampleFormat().Title + ` experts on Hopper`,
		Args: func(cmd *cobra.Command, args []string) error {
			if o.engine != "" {
				if len(args) == 1 {
					return nil
				}
				return usagef("verify --engine: want one checkpoint or output DIR\n\nUsage: pdq verify --engine sglang|vllm|all [--tp N] [--gpu G] DIR")
			}
			if len(args) == 1 && isStoreURL(args[0]) || len(args) == 2 {
				return nil
			}
			return usagef("verify: want SRC OUTDIR, or one store URL\n\nUsage: %s", cmd.UseLine())
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.engine != "" {
				return runVerifyEngine(cmd.OutOrStdout(), args[0], o)
			}
			if len(args) == 1 {
				return runVerifyRemote(cmd.Context(), cmd.OutOrStdout(), args[0], remoteVerifyOptions{Deep: o.deep, JSON: o.asJSON, Endpoint: o.endpoint, Region: o.region})
			}
			return runVerifyLocal(cmd.Context(), cmd.OutOrStdout(), args[0], args[1], o)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&o.asJSON, "json", false, "print a JSON document (problems and the recomputed report)")
	fl.IntVar(&o.workers, "workers", 0, "parallel readers (default: number of CPUs)")
	fl.BoolVar(&o.deep, "deep", false, "URL form: download and hash every file")
	fl.StringVar(&o.endpoint, "endpoint", "", "URL form: S3 endpoint (default $AWS_ENDPOINT_URL)")
	fl.StringVar(&o.region, "region", "", "URL form: S3 region (default $AWS_REGION)")
	fl.StringVar(&o.engine, "engine", "", "check DIR (a checkpoint, or a conversion's output directory) against the loading rules of sglang, vllm or all (see docs/SERVING.md)")
	fl.IntVar(&o.tp, "tp", 0, "with --engine: tensor-parallel size of the MoE layers, for the kernels' shape rules")
	fl.StringVar(&o.gpu, "gpu", "", "with --engine: the serving GPU (a100, h100, h200, b200, gb200, or sm80, sm90, sm100): refuse expert formats it cannot load (default: list every generation)")
	return cmd
}

func runVerifyLocal(ctx context.Context, w io.Writer, src, out string, o verifyOptions) error {
	if isConvertOutput(out) {
		return usagef("verify: %s holds a conversion's outputs: verify %s or %s", out, filepath.Join(out, "decode"), filepath.Join(out, "prefill"))
	}
	ck, err := safetensors.Open(src)
	if err != nil {
		return err
	}
	defer ck.Close()
	v, err := convert.Verify(ctx, ck, out, o.workers)
	if err != nil {
		return err
	}
	if o.asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(newVerifyDoc(src, v)); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(w, "verify %s (%s): %d tensors\n", out, v.Output, v.Tensors)
		if v.Report != nil && len(v.Report.Tensors) > 0 {
			writeGroups(w, v.Report.Tensors, false)
		}
		if v.ReportChecked && v.OK() {
			fmt.Fprintln(w, "report.json agrees with the recomputed metrics")
		}
		for _, p := range v.Problems {
			fmt.Fprintln(w, "PROBLEM:", p)
		}
		if v.OK() {
			fmt.Fprintln(w, "OK")
		}
	}
	if !v.OK() {
		return fmt.Errorf("verify: %d problem(s) in %s", len(v.Problems), out)
	}
	return nil
}

// verifyDoc is the JSON document of pdq verify SRC OUT: what was checked, every problem (an empty
// list when there is none), and the metrics recomputed from the files, summarized with the
// statistics of pdq report.
type verifyDoc struct {
	Tool          string                `json:"tool"`
	Source        string                `json:"source"`
	Output        string                `json:"output"` // "prefill" or "decode"
	Dir           string                `json:"dir"`
	Tensors       int                   `json:"tensors"`
	OK            bool                  `json:"ok"`
	Problems      []string              `json:"problems"`
	ReportChecked bool                  `json:"report_checked"` // report.json beside the output agreed or was compared
	Summary       []reportview.Group    `json:"summary"`        // mean_sqnr_db: mean over tensors, as pdq report
	Recomputed    []report.TensorReport `json:"tensors_recomputed"`
}

func newVerifyDoc(src string, v *convert.VerifyResult) verifyDoc {
	d := verifyDoc{Tool: "pdq " + version, Source: src, Output: v.Output, Dir: v.Dir, Tensors: v.Tensors, OK: v.OK(),
		Problems: v.Problems, ReportChecked: v.ReportChecked, Summary: []reportview.Group{}, Recomputed: []report.TensorReport{}}
	if d.Problems == nil {
		d.Problems = []string{}
	}
	if v.Report != nil && len(v.Report.Tensors) > 0 {
		d.Summary, d.Recomputed = reportview.Summarize(v.Report.Tensors), v.Report.Tensors
	}
	return d
}

// isConvertOutput reports a directory that holds prefill/ or decode/ and no shard of its own:
// the --out of pdq convert rather than one of its outputs.
func isConvertOutput(dir string) bool {
	if m, _ := filepath.Glob(filepath.Join(dir, "*.safetensors")); len(m) > 0 {
		return false
	}
	for _, kind := range []string{"decode", "prefill"} {
		if fi, err := os.Stat(filepath.Join(dir, kind)); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}
