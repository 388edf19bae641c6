//go:build unix

package reportview

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The HTML page is checked in a real headless browser: Debian's chromium package
// (apt-get install chromium), or the binary named by $CHROMIUM. Without one the tests skip,
// except under CI=true, where a missing browser is a failure.

func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH and CI=true: the HTML report must be checked in a browser (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH: install it (apt-get install chromium) or set $CHROMIUM to check the HTML report in a browser")
	return ""
}

// runChromium runs a headless browser with no network, no profile and no GPU and returns stdout.
func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--hide-scrollbars", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Its own process group, so that a timeout ends the browser's helper processes too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers left behind, if any; ESRCH otherwise
	}
	if err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", bin, err, lastLines(stderr.String(), 20))
	}
	return stdout.Bytes()
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(len(l)-n, 0):], "\n")
}

// selftest is what the page's #selftest script writes into #pdq-selftest.
type selftest struct {
	Errors  []string `json:"errors"`
	Table   string   `json:"table"`
	Initial string   `json:"initial"`
	Steps   []struct {
		Key     string `json:"key"`
		Sort    string `json:"sort"`
		First   string `json:"first"`
		Missing bool   `json:"missing"`
	} `json:"steps"`
	Images []struct {
		OK            bool `json:"ok"`
		Width, Height int
	} `json:"images"`
}

var reSelftest = regexp.MustCompile(`(?s)<pre id="pdq-selftest">(.*?)</pre>`)

// browserSelftest opens page#selftest and returns what the page reported.
func browserSelftest(t *testing.T, bin, page string) selftest {
	t.Helper()
	dom := runChromium(t, bin, "--dump-dom", "file://"+page+"#selftest")
	m := reSelftest.FindSubmatch(dom)
	if m == nil || len(m[1]) == 0 {
		t.Fatalf("the page wrote no self-test result; DOM tail:\n%s", lastLines(string(dom), 10))
	}
	var st selftest
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &st); err != nil {
		t.Fatalf("self-test result %q: %v", m[1], err)
	}
	return st
}

func writePage(t *testing.T, v *View, edit func(string) string) string {
	t.Helper()
	page := renderHTML(t, v)
	if edit != nil {
		page = edit(page)
	}
	path := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHTMLInBrowser loads the page of the fixture in chromium: no errors, the picture decodes,
// clicking the headers sorts the table, and a screenshot shows a real page.
func TestHTMLInBrowser(t *testing.T) {
	bin := findChromium(t)
	rep, err := Load(fixture)
	if err != nil {
		t.Fatal(err)
	}
	v := NewView(fixture, rep, Query{Top: 20}, NoThresholds)
	page := writePage(t, v, nil)

	// What each click must bring to the top, worked out here from the same rows.
	names := tensorNames(v.Rows)
	byName := slices.Clone(names)
	slices.SortFunc(byName, func(a, b string) int { return strings.Compare(tensorOf(a), tensorOf(b)) })
	bySQNR := slices.Clone(v.Rows)
	SortRows(bySQNR, SortSQNR)
	want := []struct{ key, sort, first string }{
		{"name", "ascending", byName[0]},
		{"name", "descending", byName[len(byName)-1]},
		{"sqnr", "ascending", tensorNames(bySQNR[:1])[0]},
		{"sqnr", "descending", tensorNames(bySQNR[len(bySQNR)-1:])[0]},
	}
	if want[0].first == names[0] || want[3].first == names[0] {
		t.Fatal("the fixture's first row is already first by name or last by SQNR: a click could not be seen")
	}

	st := browserSelftest(t, bin, page)
	if len(st.Errors) != 0 {
		t.Errorf("console errors: %q", st.Errors)
	}
	if st.Table != "worst-table" || st.Initial != names[0] {
		t.Errorf("table %q starts with %q, want worst-table starting with %q", st.Table, st.Initial, names[0])
	}
	if len(st.Steps) != len(want) {
		t.Fatalf("steps: %+v", st.Steps)
	}
	for i, w := range want {
		s := st.Steps[i]
		// Names tie across outputs only by tensor; compare the tensor part for name sorts.
		got, exp := s.First, w.first
		if w.key == "name" {
			got, exp = tensorOf(got), tensorOf(exp)
		}
		if s.Key != w.key || s.Sort != w.sort || got != exp {
			t.Errorf("click %d on %s: sorted %s with %q first, want %s with %q", i+1, s.Key, s.Sort, s.First, w.sort, w.first)
		}
	}
	if len(st.Images) != 1 || !st.Images[0].OK || st.Images[0].Width < 1000 {
		t.Errorf("images: %+v, want one decoded figure", st.Images)
	}

	shot := filepath.Join(t.TempDir(), "shot.png")
	runChromium(t, bin, "--screenshot="+shot, "--window-size=1280,1600", "file://"+page)
	checkScreenshot(t, shot, 1280, 1600)
}

func tensorOf(name string) string {
	_, t, _ := strings.Cut(name, ":")
	return t
}

// checkScreenshot wants a w×h PNG that is a rendered page: many colours, not one uniform field.
func checkScreenshot(t *testing.T, path string, w, h int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("screenshot is %v, want %dx%d", b, w, h)
	}
	colours := map[color.NRGBA]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			colours[color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)]++
		}
	}
	samples := (b.Dx() / 2) * (b.Dy() / 2)
	top := 0
	for _, n := range colours {
		top = max(top, n)
	}
	if len(colours) < 200 || float64(top) > 0.9*float64(samples) {
		t.Fatalf("screenshot has %d colours, the commonest on %.0f%% of it: not a rendered report", len(colours), 100*float64(top)/float64(samples))
	}
	if dark := countDark(img); dark < samples/200 {
		t.Fatalf("screenshot has %d dark pixels of %d: no text", dark, samples)
	}
}

func countDark(img image.Image) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r+g+bl < 3*0x4000 {
				n++
			}
		}
	}
	return n
}

// TestBrowserSeesErrors is the control: a page with a script error, a console.error call and a
// network request must come back with all three reported.
func TestBrowserSeesErrors(t *testing.T) {
	bin := findChromium(t)
	rep, err := Load(fixture)
	if err != nil {
		t.Fatal(err)
	}
	v := NewView(fixture, rep, Query{Top: 5}, NoThresholds)
	page := writePage(t, v, func(s string) string {
		bad := `<script>console.error("boom"); noSuchFunction();</script><img src="http://192.0.2.1/x.png" alt="">`
		return strings.Replace(s, `<pre id="pdq-selftest"`, bad+`<pre id="pdq-selftest"`, 1)
	})
	st := browserSelftest(t, bin, page)
	all := strings.Join(st.Errors, "\n")
	for _, want := range []string{"console.error: boom", "noSuchFunction", "content security policy"} {
		if !strings.Contains(all, want) {
			t.Errorf("errors %q lack %q", st.Errors, want)
		}
	}
}
