package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// defaultProgressEvery is how often publish and pull print a progress line when stderr is not a
// terminal (a log file, a CI job), as aws-cli and huggingface-cli do.
const defaultProgressEvery = 10 * time.Second

// byteProgress shows the progress of publish, pull and verify --deep: they add to atomic
// counters (publish.Progress), and a ticker redraws convert's bar on a terminal or prints a
// plain line now and then elsewhere, so workers never wait on the output.
type byteProgress struct {
	total, done atomic.Int64
	bar         *progressBar // on a terminal
	w           io.Writer    // elsewhere: plain lines
	label       string
	start       time.Time
	stop        chan struct{}
	wg          sync.WaitGroup
}

// stderrProgress returns the progress of a transfer on stderr: convert's bar on a terminal, a
// line every `every` elsewhere, nil when every is 0 and stderr is not a terminal.
func stderrProgress(label string, every time.Duration) *byteProgress {
	if fd, ok := terminalFD(os.Stderr); ok {
		return startByteProgress(os.Stderr, fd, true, label, progressTick)
	}
	if every <= 0 {
		return nil
	}
	return startByteProgress(os.Stderr, 0, false, label, every)
}

// startByteProgress starts the ticker: on the terminal fd (tty) a bar redrawn every tick,
// otherwise a plain line on w every tick.
func startByteProgress(w io.Writer, fd int, tty bool, label string, tick time.Duration) *byteProgress {
	p := &byteProgress{w: w, label: label, start: time.Now(), stop: make(chan struct{})}
	if tty {
		p.bar = newProgressBar(w, fd, label)
		activeBar.Store(p.bar)
	}
	p.wg.Go(func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.show()
			}
		}
	})
	return p
}

// show passes the counters to the bar, or prints a line once there is a total.
func (p *byteProgress) show() {
	done, total := p.done.Load(), p.total.Load()
	if p.bar != nil {
		p.bar.Update(done, total, "")
		return
	}
	if total > 0 {
		fmt.Fprintln(p.w, progressText(p.label, done, total, time.Since(p.start)))
	}
}

// progressText is a plain progress line, in the units of convert's bar:
//
//	publish: 45% of 3.66 GiB (1.62 GiB done, 12.30 MiB/s, ETA 2m50s)
func progressText(label string, done, total int64, elapsed time.Duration) string {
	done = min(max(done, 0), total)
	line := fmt.Sprintf("%s: %.0f%% of %s (%s done", label, 100*float64(done)/float64(max(total, 1)), formatBytes(total), formatBytes(done))
	if s := elapsed.Seconds(); s > 0.5 && done > 0 {
		r := float64(done) / s
		line += ", " + formatBytes(int64(r)) + "/s"
		if done < total {
			line += ", ETA " + shortDuration(time.Duration(float64(total-done)/r*float64(time.Second)))
		}
	}
	return line + ")"
}

// AddTotal implements publish.Progress.
func (p *byteProgress) AddTotal(n int64) { p.total.Add(n) }

// Add implements publish.Progress.
func (p *byteProgress) Add(n int64) { p.done.Add(n) }

// finish stops the ticker; a bar is drawn as it stands and its line ended. A nil progress does
// nothing.
func (p *byteProgress) finish() {
	if p == nil {
		return
	}
	close(p.stop)
	p.wg.Wait()
	if p.bar != nil {
		p.bar.Update(p.done.Load(), p.total.Load(), "")
		p.bar.Stop()
		activeBar.CompareAndSwap(p.bar, nil)
	}
}
