package main

import (
	"strings"
	"testing"
)

// TestShortName: a name cut to fit keeps its layer (and expert) number and its end.
func TestShortName(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		want string
	}{
		{"model.layers.17.mlp.experts.123.gate_proj.weight", 60, "model.layers.17.mlp.experts.123.gate_proj.weight"},
		{"model.layers.17.mlp.experts.123.gate_proj.weight", 40, "layers.17.mlp.experts.123.gate_proj"},
		{"model.layers.17.mlp.experts.123.gate_proj.weight", 20, "L17 E123 gate_proj"},
		{"model.layers.17.self_attn.q_a_proj.weight", 20, "L17 …f_attn.q_a_proj"},
		{"model.layers.3.mlp.shared_experts.down_proj.weight_packed", 16, "L3 …ts.down_proj"},
		{"model.embed_tokens.weight", 10, "…ed_tokens"},
	} {
		got := shortName(tc.name, tc.n)
		if got != tc.want || cols(got) > tc.n {
			t.Errorf("shortName(%q, %d) = %q, want %q", tc.name, tc.n, got, tc.want)
		}
	}
}

// lastLine is the last line a bar drew in out: what follows the last "\r", without the erase
// sequence and the final line feed.
func lastLine(out string) string {
	line := out[strings.LastIndex(out, "\r")+1:]
	line = strings.TrimSuffix(line, "\n")
	return strings.TrimSuffix(line, eraseLine)
}

// drawBar draws a bar of done of total bytes on a terminal of width columns and returns what it
// wrote once stopped.
func drawBar(width int, done, total int64, name string) string {
	var buf strings.Builder
	b := startProgressBar(&buf, func() int { return width }, "convert [cpu]")
	b.Update(done, total, name)
	b.draw() // measures the rate and the times for the layout of the next draw
	b.Stop()
	return buf.String()
}

// TestProgressBarFits: the bar, drawn by progressbar/v3, fits every width in IEC units and an
// ASCII bar, keeps the layer and expert numbers of the name when it shows it, and shows the
// whole tensor name when wide.
func TestProgressBarFits(t *testing.T) {
	name := "model.layers.17.mlp.experts.123.gate_proj.weight"
	for _, tc := range []struct {
		width          int
		want, wantNone []string
	}{
		{200, []string{"convert [cpu] ", name, " 45% [", "/100 GiB", "iB/s)", "s:"}, []string{"…"}},
		{120, []string{"convert [cpu] ", "L17 E123 gate_proj", " 45% [", "/100 GiB"}, nil},
		{80, []string{"convert [cpu] ", "L17 E123", " 45% [", "/100 GiB"}, nil},
		{60, []string{"convert", " 45% [", "/100 GiB"}, nil},
		{40, []string{"convert", " 45% ["}, nil},
		{20, []string{"convert"}, nil},
	} {
		out := drawBar(tc.width, 45<<30, 100<<30, name)
		for _, line := range strings.Split(strings.ReplaceAll(out, "\n", "\r"), "\r") {
			if line = strings.TrimSuffix(line, eraseLine); cols(line) >= tc.width {
				t.Errorf("width %d: a line of %d columns: %q", tc.width, cols(line), line)
			}
		}
		line := lastLine(out)
		t.Logf("%3d: %s", tc.width, line)
		for _, w := range tc.want {
			if !strings.Contains(line, w) {
				t.Errorf("width %d: no %q in %q", tc.width, w, line)
			}
		}
		for _, w := range tc.wantNone {
			if strings.Contains(line, w) {
				t.Errorf("width %d: %q in %q", tc.width, w, line)
			}
		}
		if strings.Contains(line, " GB") || strings.Contains(line, " MB") {
			t.Errorf("width %d: SI units in %q", tc.width, line)
		}
		for _, r := range strings.ReplaceAll(line, "…", "") {
			if r > '~' {
				t.Errorf("width %d: %q is not ASCII: %q", tc.width, r, line)
				break
			}
		}
		if i := strings.Index(line, "% ["); tc.width >= 40 && (i < 0 || !strings.Contains(line[i:], "=>")) {
			t.Errorf("width %d: no [===>   ] bar in %q", tc.width, line)
		}
	}
}

// TestProgressBarResize: a terminal that narrows between redraws gets lines that fit the new
// width.
func TestProgressBarResize(t *testing.T) {
	var buf strings.Builder
	width := 200
	b := startProgressBar(&buf, func() int { return width }, "convert [cpu]")
	b.Update(45<<30, 100<<30, "model.layers.17.mlp.experts.123.gate_proj.weight")
	b.draw()
	width = 80
	mark := buf.Len()
	b.draw()
	b.Stop()
	for _, line := range strings.Split(strings.ReplaceAll(buf.String()[mark:], "\n", "\r"), "\r") {
		if line = strings.TrimSuffix(line, eraseLine); cols(line) >= 80 {
			t.Errorf("after the resize: a line of %d columns: %q", cols(line), line)
		}
	}
}

// TestProgressBarStopsWhereItWas: Stop draws the state as it is, not 100%, and ends the line.
func TestProgressBarStopsWhereItWas(t *testing.T) {
	var buf strings.Builder
	b := startProgressBar(&buf, func() int { return 80 }, "convert [cpu]")
	b.Update(30, 100, "x")
	b.Stop()
	out := buf.String()
	if !strings.HasSuffix(out, "\n") || !strings.Contains(lastLine(out), " 30%") || strings.Contains(out, "100%") {
		t.Errorf("after Stop: %q", out)
	}
	b.Stop() // a second Stop draws nothing more
	if buf.String() != out {
		t.Errorf("second Stop wrote %q", buf.String()[len(out):])
	}
}

// TestLogWriterClearsBar: a log record erases the bar's line first and the bar is drawn again
// below it, so the two never share a line.
func TestLogWriterClearsBar(t *testing.T) {
	var buf strings.Builder
	b := startProgressBar(&buf, func() int { return 80 }, "convert [cpu]")
	b.Update(30, 100, "x")
	b.draw()
	activeBar.Store(b)
	defer activeBar.Store(nil)
	logWriter{&buf}.Write([]byte("level=DEBUG msg=shard\n"))
	b.Stop()
	out := buf.String()
	i := strings.Index(out, "level=DEBUG")
	if i < 0 || !strings.HasSuffix(out[:i], "\r\x1b[2K") {
		t.Errorf("the log record does not start on an erased line: %q", out)
	}
	if j := strings.Index(out[i:], "\n"); j < 0 || !strings.Contains(out[i+j:], " 30%") {
		t.Errorf("the bar is not drawn again below the record: %q", out)
	}
}
