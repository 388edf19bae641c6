package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the ticker and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Outside a terminal, publish and pull print a plain progress line every --progress-interval,
// in convert's units (binary, ASCII); --quiet and an interval of 0 print none.
func TestTransferProgressPlainLines(t *testing.T) {
	var buf syncBuffer
	p := startByteProgress(&buf, 0, false, "publish", time.Millisecond)
	p.AddTotal(3 << 30)
	p.Add(3 << 29)
	for i := 0; i < 10000 && !strings.Contains(buf.String(), "\n"); i++ {
		time.Sleep(time.Millisecond)
	}
	p.finish()
	line, _, _ := strings.Cut(buf.String(), "\n")
	if !strings.HasPrefix(line, "publish: 50% of 3.00 GiB (1.50 GiB done") || strings.ContainsAny(line, "\r\x1b") {
		t.Errorf("progress line %q", line)
	}
	if s := progressText("pull", 1<<20, 4<<20, 2*time.Second); s != "pull: 25% of 4.00 MiB (1.00 MiB done, 512.00 KiB/s, ETA 6s)" {
		t.Errorf("progressText = %q", s)
	}
	o := pubFlags()
	o.quiet = true
	if o.progress("publish") != nil {
		t.Error("--quiet prints progress")
	}
	o.quiet, o.progressEvery = false, 0
	if o.progress("publish") != nil {
		t.Error("--progress-interval 0 prints progress outside a terminal")
	}
	o.progressEvery = time.Hour
	p = o.progress("publish")
	if p == nil {
		t.Error("no progress outside a terminal")
	}
	p.finish()
}

// On a terminal, publish and pull draw the bar convert draws (progressbar/v3: IEC units, an
// ASCII bar), and finish ends its line where the transfer stood.
func TestTransferProgressBar(t *testing.T) {
	var buf syncBuffer
	p := startByteProgress(&buf, -1, true, "publish", time.Millisecond)
	p.AddTotal(3 << 30)
	p.Add(3 << 29)
	for i := 0; i < 10000 && !strings.Contains(buf.String(), "%"); i++ {
		time.Sleep(time.Millisecond)
	}
	p.finish()
	out := buf.String()
	line := lastLine(out)
	if !strings.HasSuffix(out, "\n") || !strings.HasPrefix(line, "publish ") || !strings.Contains(line, " 50% [") ||
		!strings.Contains(line, "/3.0 GiB") || !strings.Contains(line, "=>") || cols(line) >= 80 {
		t.Errorf("publish bar %q", out)
	}
	if activeBar.Load() != nil {
		t.Error("the bar is still the active one after finish")
	}
}
