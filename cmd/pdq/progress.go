package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
)

// progressBar draws the progress of a long command on one terminal line, redrawn in place
// ("\r", the line, erase to its end) by a ticker, and fitted to the terminal's width at every
// redraw, so a resized window (tmux at 80 or 200 columns) never wraps it. Update is cheap and
// may be called from any goroutine; Stop draws the state as it is (an interrupted run stays
// where it stopped) and ends the line.
type progressBar struct {
	w     io.Writer
	width func() int // terminal columns
	label string
	start time.Time

	mu          sync.Mutex
	done, total int64
	name        string
	drawn       string // the last line drawn, "" before the first

	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// progressTick is how often the bar is redrawn.
const progressTick = 150 * time.Millisecond

// newProgressBar starts a bar on w, a terminal with file descriptor fd.
func newProgressBar(w io.Writer, fd int, label string) *progressBar {
	return startProgressBar(w, func() int {
		if c, _, err := term.GetSize(fd); err == nil && c > 0 {
			return c
		}
		return 80
	}, label)
}

func startProgressBar(w io.Writer, width func() int, label string) *progressBar {
	b := &progressBar{w: w, width: width, label: label, start: time.Now(), stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(b.stopped)
		t := time.NewTicker(progressTick)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				b.draw()
			case <-b.stop:
				return
			}
		}
	}()
	return b
}

// Update records the work done of total and the item being worked on.
func (b *progressBar) Update(done, total int64, name string) {
	b.mu.Lock()
	b.done, b.total, b.name = done, total, name
	b.mu.Unlock()
}

// Stop ends the redraws, draws the state as it is and ends the line (when anything was drawn).
func (b *progressBar) Stop() {
	b.once.Do(func() {
		close(b.stop)
		<-b.stopped
		b.mu.Lock()
		started := b.total > 0 || b.drawn != ""
		b.mu.Unlock()
		if started {
			b.draw()
			fmt.Fprint(b.w, "\n")
		}
	})
}

func (b *progressBar) draw() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total <= 0 {
		return
	}
	line := progressLine(b.width(), b.label, b.done, b.total, time.Since(b.start), b.name)
	if line == b.drawn {
		return
	}
	b.drawn = line
	fmt.Fprint(b.w, "\r"+line+"\x1b[K")
}

// progressLine lays out one line of progress in fewer than width columns:
//
//	convert [cpu]  45% [=========>          ] 1.62/3.66 GiB  12.30 MiB/s  ETA 12s  model.layers.3.mlp.experts.7.up_proj.weight
//
// When the terminal is narrow it shortens the bar (to no less than 10 columns) and the name,
// keeping its layer ("L3 E7 up_proj", see shortName), then drops the rate, the name, the byte
// counts, the ETA and the label's detail, in that order; a wide one gets a bar of 40 columns.
func progressLine(width int, label string, done, total int64, elapsed time.Duration, name string) string {
	const barMin, barMax, nameMin, nameWant = 10, 40, 16, 56
	budget := width - 1 // the last column would make some terminals wrap
	done = min(max(done, 0), total)
	frac := float64(done) / float64(max(total, 1))
	pct := fmt.Sprintf("%3.0f%%", 100*frac)
	bytes := formatBytes(done) + "/" + formatBytes(total)
	if d, t := formatBytes(done), formatBytes(total); d[strings.LastIndex(d, " "):] == t[strings.LastIndex(t, " "):] {
		bytes = d[:strings.LastIndex(d, " ")] + "/" + t // one unit: "32.74/48.55 MiB"
	}
	rate, eta := "", "ETA -"
	if s := elapsed.Seconds(); s > 0.5 && done > 0 {
		r := float64(done) / s
		rate = formatBytes(int64(r)) + "/s"
		eta = "ETA " + shortDuration(time.Duration(float64(total-done)/r*float64(time.Second)))
	}
	if done == total {
		eta = "in " + shortDuration(elapsed) // finished: how long it took
	}
	short, _, _ := strings.Cut(label, " ")
	type layout struct {
		label         string
		bytes, rate   bool
		eta           bool
		withName      bool
		minNameColumn int
	}
	// From the fullest layout to the barest; the first that fits is used.
	layouts := []layout{
		{label, true, true, true, true, nameMin},
		{label, true, false, true, true, nameMin},
		{label, true, true, true, false, 0},
		{label, true, false, true, false, 0},
		{label, false, false, true, false, 0},
		{short, false, false, true, false, 0},
		{short, false, false, false, false, 0},
	}
	for i, l := range layouts {
		head := []string{l.label, pct}
		var tail []string
		if l.bytes {
			tail = append(tail, bytes)
		}
		if l.rate && rate != "" {
			tail = append(tail, rate)
		}
		if l.eta {
			tail = append(tail, eta)
		}
		// head, bar and tail are separated by single spaces, tail fields by two.
		fixed := cols(strings.Join(head, " ")) + 1 + 2 + 1 + cols(strings.Join(tail, "  "))
		if len(tail) == 0 {
			fixed--
		}
		room := budget - fixed
		if l.withName {
			room -= 2 + l.minNameColumn
		}
		if room < barMin && i < len(layouts)-1 {
			continue
		}
		barW := min(max(budget-fixed, 1), barMax)
		if l.withName {
			// The name column comes before a longer bar (it says where the run is), up to
			// nameWant; the bar's width depends only on the terminal's, so it does not jitter
			// as names change length.
			barW = min(max(budget-fixed-2-nameWant, barMin), barMax)
		}
		line := strings.Join(head, " ") + " " + bar(barW, frac)
		if len(tail) > 0 {
			line += " " + strings.Join(tail, "  ")
		}
		if l.withName && name != "" {
			line += "  " + shortName(name, budget-cols(line)-2)
		}
		return truncateCols(line, budget)
	}
	return ""
}

// bar is a bar of w columns between brackets, filled to frac.
func bar(w int, frac float64) string {
	fill := int(frac * float64(w))
	switch {
	case fill >= w:
		return "[" + strings.Repeat("=", w) + "]"
	case fill > 0:
		return "[" + strings.Repeat("=", fill-1) + ">" + strings.Repeat(" ", w-fill) + "]"
	}
	return "[" + strings.Repeat(" ", w) + "]"
}

// cols is the width of s in terminal columns (every rune of these lines is one column wide).
func cols(s string) int { return utf8.RuneCountInString(s) }

// shortName fits a tensor name into n columns keeping what says where the run is: the layer
// (and expert) number and the end of the name. It drops the "model." prefix and the ".weight"
// suffixes first, then writes the layer and expert compactly ("L17 E123 gate_proj"), then cuts
// the middle after the layer ("L17 …gate_proj"); a name without a layer keeps its end.
func shortName(s string, n int) string {
	if cols(s) <= n {
		return s
	}
	s = strings.TrimPrefix(s, "model.")
	for _, suf := range []string{".weight_packed", ".weight"} {
		s = strings.TrimSuffix(s, suf)
	}
	if cols(s) <= n {
		return s
	}
	if m := layerName.FindStringSubmatch(s); m != nil {
		head, rest := "L"+m[1]+" ", m[3]
		if m[2] != "" {
			head += "E" + m[2] + " "
		}
		if c := head + rest; cols(c) <= n {
			return c
		}
		if keep := n - cols(head) - 1; keep >= 6 {
			r := []rune(rest)
			return head + "…" + string(r[len(r)-keep:])
		}
	}
	return leftTruncate(s, n)
}

// layerName splits a name into its layer, its expert (or "") and the rest.
var layerName = regexp.MustCompile(`^(?:.*?\.)?layers\.(\d+)\.(?:(?:mlp\.)?experts\.(\d+)\.)?(?:mlp\.)?(.+)$`)

// leftTruncate keeps the end of s in n columns, marking a cut with "…".
func leftTruncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n <= 1 {
		return ""
	}
	return "…" + string(r[len(r)-n+1:])
}

// truncateCols cuts s to at most n columns.
func truncateCols(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:max(n, 0)])
}

// shortDuration prints a duration for an ETA: 45s, 3m04s, 2h05m.
func shortDuration(d time.Duration) string {
	s := int64(d.Round(time.Second).Seconds())
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm", s/3600, s/60%60)
}

// terminalFD returns the file descriptor of w when w is a terminal: progress is drawn only there.
func terminalFD(w io.Writer) (int, bool) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0, false
	}
	return int(f.Fd()), true
}

// activeBar is the progress bar on the terminal, if any: log lines clear it first.
var activeBar atomic.Pointer[progressBar]

// logWriter writes log records to w; when a progress bar is drawn it erases the bar's line first
// (the bar is drawn again below the record at the next tick), so -v logs and the bar never share
// a line.
type logWriter struct{ w io.Writer }

func (l logWriter) Write(p []byte) (int, error) {
	b := activeBar.Load()
	if b == nil {
		return l.w.Write(p)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.drawn != "" {
		io.WriteString(l.w, "\r\x1b[K")
		b.drawn = ""
	}
	return l.w.Write(p)
}
