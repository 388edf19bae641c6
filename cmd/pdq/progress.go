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

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressBar draws the progress of a long command (convert, publish, pull) on one terminal
// line with progressbar/v3, so every command's bar looks the same: IEC units, an ASCII bar,
// the rate and the time left. A ticker passes the latest state to the library, after fitting
// the description (the label and the item being worked on, see shortName) and the bar to the
// terminal's width at that moment, so a resized window (tmux at 80 or 200 columns) never wraps
// it. Update is cheap and may be called from any goroutine; Stop draws the state as it is (an
// interrupted run stays where it stopped) and ends the line.
type progressBar struct {
	w     io.Writer
	width func() int // terminal columns
	label string

	mu          sync.Mutex // guards the fields below and every call into pb
	pb          *progressbar.ProgressBar
	done, total int64
	pbMax       int64  // the total pb was last given
	name        string // the item being worked on
	desc        string // the description pb was last given
	stats       int    // columns of the byte counts and the rate in the last line drawn
	times       int    // columns of the elapsed and remaining times in the last line drawn
	budget      int    // columns a line may take at the last draw
	drawn       string // the last line drawn, "" before the first or once erased

	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// progressTick is how often the bar is redrawn.
const progressTick = 150 * time.Millisecond

// barTheme is the bar's look: [=====>    ].
var barTheme = progressbar.Theme{Saucer: "=", SaucerHead: ">", SaucerPadding: " ", BarStart: "[", BarEnd: "]"}

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
	b := &progressBar{w: w, width: width, label: label, stop: make(chan struct{}), stopped: make(chan struct{})}
	// The library writes to lineWriter, which keeps the line for logWriter; every call into
	// it is made under b.mu, the only goroutine that draws is the ticker below (a bar of known
	// length starts none of its own), and the ticker paces the redraws, so no throttle is set:
	// one would drop Stop's final draw of an interrupted run.
	b.pb = progressbar.NewOptions64(0,
		progressbar.OptionSetWriter(lineWriter{b}),
		progressbar.OptionUseANSICodes(true), // "\r", the line, erase to its end
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionSetTheme(barTheme),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionSetWidth(barMin),
		progressbar.OptionSetDescription(label+" "),
	)
	b.pb.StartWithoutRender() // the clock runs from the start, not from the first byte
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
			b.mu.Lock()
			io.WriteString(b.w, "\n")
			b.drawn = ""
			b.mu.Unlock()
		}
	})
}

// Bar layout: the bar is 10 to 40 columns and depends only on the terminal's width (so it does
// not jitter as names change length); the item's name gets the room left, and only when it has
// nameMin columns, enough for "L17 E123 …_proj".
const (
	barMin, barMax = 10, 40
	nameMin        = 16
	// statsGuess and timesGuess are the columns of " (1.6/3.7 GiB, 12 MiB/s)" and " [2s:3s]"
	// before the first draw; later draws measure them on the line drawn last.
	statsGuess, timesGuess = 24, 8
)

// draw fits the description and the bar to the terminal and passes the latest state to the
// library, which redraws the line.
func (b *progressBar) draw() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total <= 0 {
		return
	}
	b.budget = b.width() - 1 // the last column would make some terminals wrap
	l := chooseLayout(b.budget, b.label, b.name, b.stats, b.times)
	// Options set between renders: the width, the description and the fields of the next line.
	progressbar.OptionSetWidth(l.barW)(b.pb)
	progressbar.OptionSetPredictTime(l.times)(b.pb)
	if l.desc != b.desc {
		progressbar.OptionSetDescription(l.desc)(b.pb)
		b.desc = l.desc
	}
	if b.total != b.pbMax {
		b.pb.ChangeMax64(b.total)
		b.pbMax = b.total
	}
	b.pb.Set64(min(max(b.done, 0), b.total))
	b.measure(l)
}

// measure keeps the columns of the rate and of the times of the line drawn last, for the next
// layout.
func (b *progressBar) measure(l barLine) {
	line := b.drawn
	if line == "" || !strings.HasPrefix(line, l.desc) {
		return
	}
	// What follows the description: "%4d%% " (6 columns), the bar and its brackets.
	tail := cols(line) - cols(l.desc) - 6 - l.barW - 2
	if l.times && strings.HasSuffix(line, "]") {
		if i := strings.LastIndex(line, " ["); i >= 0 {
			b.times = cols(line[i:])
			tail -= b.times
		}
	}
	b.stats = max(tail, 0)
}

// barLine is the layout of one line: the bar's width, the description before it, and whether
// the elapsed and remaining times follow it.
type barLine struct {
	barW  int
	desc  string
	times bool
}

// chooseLayout lays out a line of budget columns whose rate took stats columns and times took
// times columns last time. From the fullest layout to the barest, the first that fits is used:
// the label, the item's name (cut by shortName to keep its layer and expert numbers) and the
// times; then without the times; then without the name; then with the label's first word
// alone. A line that still does not fit is cut by lineWriter.
func chooseLayout(budget int, label, name string, stats, times int) barLine {
	if stats == 0 {
		stats = statsGuess
	}
	if times == 0 {
		times = timesGuess
	}
	stats += 2 // the rate and the times may grow a little before the next draw
	barW := min(max(budget/2-30, barMin), barMax)
	short, _, _ := strings.Cut(label, " ")
	for _, l := range []struct {
		label      string
		name, time bool
	}{
		{label, true, true},
		{label, true, false},
		{label, false, true},
		{label, false, false},
		{short, false, false},
	} {
		used := cols(l.label) + 1 + 6 + barW + 2 + stats
		if l.time {
			used += times
		}
		desc := l.label + " "
		if l.name {
			n := budget - used - 1
			if name == "" || n < nameMin {
				continue
			}
			desc += shortName(name, n) + " "
		} else if used > budget && l.label != short {
			continue
		}
		return barLine{barW, desc, l.time}
	}
	return barLine{barW, short + " ", false}
}

// lineWriter receives the library's drawing: it keeps the line for logWriter and cuts a line
// that would not fit the terminal (a rate or an ETA that grew since the layout was chosen), so
// the line never wraps.
type lineWriter struct{ b *progressBar }

// eraseLine is the library's end of a line drawn with ANSI codes: erase to the end of the line.
const eraseLine = "\x1b[0K"

func (l lineWriter) Write(p []byte) (int, error) {
	s := string(p)
	if line, ok := strings.CutPrefix(s, "\r"); ok {
		line, _ = strings.CutSuffix(line, eraseLine)
		if l.b.budget > 0 {
			line = truncateCols(line, l.b.budget)
		}
		l.b.drawn = line
		s = "\r" + line + eraseLine
	}
	if _, err := io.WriteString(l.b.w, s); err != nil {
		return 0, err
	}
	return len(p), nil
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

// logWriter writes log records to w; when a progress bar is drawn it erases the bar's line
// first and draws the bar again below the record, so -v logs and the bar never share a line.
type logWriter struct{ w io.Writer }

func (l logWriter) Write(p []byte) (int, error) {
	b := activeBar.Load()
	if b == nil {
		return l.w.Write(p)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.drawn == "" {
		return l.w.Write(p)
	}
	io.WriteString(l.w, "\r\x1b[2K")
	n, err := l.w.Write(p)
	if err == nil && len(p) > 0 && p[len(p)-1] == '\n' {
		io.WriteString(b.w, "\r"+b.drawn+eraseLine)
	} else {
		b.drawn = "" // the next tick draws it again
	}
	return n, err
}
