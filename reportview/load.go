package reportview

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"pdq/internal/fsutil"
	"pdq/quantize/report"
)

// ErrFormat marks a file that is not a report.json written by pdq convert.
var ErrFormat = errors.New("not a pdq report")

// maxReportBytes bounds what Load reads: a report of a 1.5·10¹² parameter model is about 60 MB.
const maxReportBytes = 1 << 30

// maxIndex bounds a row's layer and expert numbers (models have hundreds of each): the views
// index grids by them.
const maxIndex = 1 << 20

// Load reads and checks the report at path.
func Load(path string) (*report.Report, error) {
	// A FIFO or device in the report's place is refused, never waited on or read without end.
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("reportview: %w", err)
	}
	defer f.Close()
	return Decode(f, path)
}

// Decode reads a report from r; name is used in errors. It refuses JSON that is not a report
// (no tensors list, rows without an output or tensor name, negative sizes) with an error wrapping
// ErrFormat.
func Decode(r io.Reader, name string) (*report.Report, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxReportBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reportview: %s: %w", name, err)
	}
	if len(data) > maxReportBytes {
		return nil, fmt.Errorf("reportview: %s: larger than %d bytes: %w", name, maxReportBytes, ErrFormat)
	}
	// A report is an object with a "tensors" array; check the shape before decoding into
	// the typed struct so that a different JSON file gets a clear message.
	var probe struct {
		Tool    string          `json:"tool"`
		Tensors json.RawMessage `json:"tensors"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("reportview: %s: %w: %v", name, ErrFormat, err)
	}
	// Earlier versions wrote "tensors": null for a conversion that measured nothing (--only
	// prefill of an FP8 source); such a report names its tool.
	t := bytes.TrimSpace(probe.Tensors)
	if len(t) == 0 || (t[0] != '[' && !(probe.Tool != "" && bytes.Equal(t, []byte("null")))) {
		return nil, fmt.Errorf("reportview: %s: no \"tensors\" list: %w", name, ErrFormat)
	}
	var rep report.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("reportview: %s: %w: %v", name, ErrFormat, err)
	}
	for i := range rep.Tensors {
		if err := checkRow(&rep.Tensors[i]); err != nil {
			return nil, fmt.Errorf("reportview: %s: tensors[%d]: %w", name, i, err)
		}
	}
	return &rep, nil
}

// checkRow refuses a row that the views could not place.
func checkRow(t *report.TensorReport) error {
	switch {
	case t.Tensor == "":
		return fmt.Errorf("no tensor name: %w", ErrFormat)
	case t.Output == "":
		return fmt.Errorf("tensor %q: no output: %w", t.Tensor, ErrFormat)
	case t.Elements < 0:
		return fmt.Errorf("tensor %q: negative element count %d: %w", t.Tensor, t.Elements, ErrFormat)
	case t.GroupSize < -1: // -1 is one scale per output channel
		return fmt.Errorf("tensor %q: group size %d: %w", t.Tensor, t.GroupSize, ErrFormat)
	case t.Layer < -1 || t.Layer > maxIndex: // -1 is not in a layer
		return fmt.Errorf("tensor %q: layer %d: %w (want -1 to %d)", t.Tensor, t.Layer, ErrFormat, maxIndex)
	case t.Expert < -1 || t.Expert > maxIndex: // -1 is not a routed expert
		return fmt.Errorf("tensor %q: expert %d: %w (want -1 to %d)", t.Tensor, t.Expert, ErrFormat, maxIndex)
	}
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("tensor %q: negative dimension in shape %v: %w", t.Tensor, t.Shape, ErrFormat)
		}
	}
	return nil
}
