package reportview

import (
	"bytes"
	"encoding/base64"
	"html"
	"image/png"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"pdq/quantize/report"
)

func renderHTML(t testing.TB, v *View) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

var (
	reExternal = regexp.MustCompile(`(?i)(\bsrc|\bhref|\baction)\s*=\s*["']?\s*(https?:|//|file:)|@import|url\(\s*["']?(https?:|//)|<link\b|<iframe\b|<object\b`)
	reDataPNG  = regexp.MustCompile(`<img src="data:image/png;base64,([A-Za-z0-9+/=&#;]+)" width="(\d+)" height="(\d+)"`)
	reRowNames = regexp.MustCompile(`<tr data-name="([^"]+)">`)
)

func TestHTMLSelfContained(t *testing.T) {
	rep, err := Load(fixture)
	if err != nil {
		t.Fatal(err)
	}
	v := NewView(fixture, rep, Query{Top: 20}, Thresholds{SQNRBelow: 18.5, RelRMSEAbove: 1})
	page := renderHTML(t, v)
	if m := reExternal.FindString(page); m != "" {
		t.Fatalf("the page refers to something outside itself: %q", m)
	}
	for _, want := range []string{
		`<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:;`,
		`<table id="summary-table">`, `<table id="worst-table" class="sortable">`,
		`data-key="sqnr" aria-sort="ascending">SQNR dB</th>`, `id="pdq-selftest"`,
		`FAIL: 4 of 104 selected tensors over the thresholds (SQNR &lt; 18.5 dB, rel RMSE &gt; 1)`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	m := reDataPNG.FindStringSubmatch(page)
	if m == nil {
		i := strings.Index(page, "<img")
		t.Fatalf("no inline PNG: %.200s", page[max(i, 0):])
	}
	data, err := base64.StdEncoding.DecodeString(html.UnescapeString(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); m[2] != strconv.Itoa(b.Dx()) || m[3] != strconv.Itoa(b.Dy()) {
		t.Fatalf("img says %sx%s, the PNG is %v", m[2], m[3], b)
	}
	// The worst table holds the view's rows in order (20 rows, then the failures table).
	var names []string
	for _, sm := range reRowNames.FindAllStringSubmatch(page, -1) {
		names = append(names, sm[1])
	}
	if len(names) != 4+20 {
		t.Fatalf("%d named rows, want 4 failures + 20", len(names))
	}
	for i, r := range v.Rows {
		if names[4+i] != r.Output+":"+r.Tensor {
			t.Fatalf("row %d is %q, want %q", i, names[4+i], r.Output+":"+r.Tensor)
		}
	}
	if page != renderHTML(t, v) {
		t.Fatal("two renderings differ")
	}
}

// TestHTMLEscapes puts markup into names: the page must show it as text.
func TestHTMLEscapes(t *testing.T) {
	evil := `model.layers.0.x"><script>alert(1)</script>`
	rep := &report.Report{Tool: `pdq</title><script>alert(2)</script>`, Source: `<img src=x onerror=alert(3)>`,
		Tensors: []report.TensorReport{row("decode", evil, "attention", "bf16", 50, 0.003)}}
	page := renderHTML(t, NewView("r.json", rep, Query{}, NoThresholds))
	for _, bad := range []string{"<script>alert", "<img src=x"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q unescaped", bad)
		}
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the tensor name is not shown escaped")
	}
}

func TestHTMLCompareAndNoPictures(t *testing.T) {
	rep, err := Load(fixture)
	if err != nil {
		t.Fatal(err)
	}
	rtn, err := Load(fixtureRTN)
	if err != nil {
		t.Fatal(err)
	}
	v := NewView(fixture, rep, Query{Top: 5, Sort: SortName}, NoThresholds)
	v.Compare(fixtureRTN, rtn)
	page := renderHTML(t, v)
	for _, want := range []string{`<table id="roles-table">`, `<table id="movers-table" class="sortable">`,
		`data-key="name" aria-sort="ascending">tensor</th>`, `class="n pos" data-v="0.8`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	v = NewView(fixture, rep, Query{Roles: []string{"attention"}, Output: "decode"}, NoThresholds)
	if page := renderHTML(t, v); !strings.Contains(page, "No pictures") || strings.Contains(page, "<img") {
		t.Error("an empty selection should say there are no pictures")
	}
}
