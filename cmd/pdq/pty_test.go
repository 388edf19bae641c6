//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"pdq/quantize/convert"
)

// openPTY opens a pseudo-terminal of the given size: the master side (the test reads what pdq
// draws and types Ctrl-C there) and the slave side (pdq's stdin, stdout and stderr). Echo is
// off so the typed ^C does not land on the screen.
func openPTY(t *testing.T, cols, rows int) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	sfd := int(slave.Fd())
	if err := unix.IoctlSetWinsize(sfd, unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(rows), Col: uint16(cols)}); err != nil {
		t.Fatal(err)
	}
	tio, err := unix.IoctlGetTermios(sfd, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Lflag &^= unix.ECHO
	tio.Lflag |= unix.ISIG
	if err := unix.IoctlSetTermios(sfd, unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	return master, slave
}

// ptySession is pdq running on a pseudo-terminal, as its own session with the terminal as its
// controlling terminal, so Ctrl-C typed on the master reaches it as SIGINT the way it does in a
// shell.
type ptySession struct {
	cmd    *exec.Cmd
	master *os.File
	mu     sync.Mutex
	out    bytes.Buffer
	read   chan struct{}
}

func startPTY(t *testing.T, cols int, args ...string) *ptySession {
	t.Helper()
	master, slave := openPTY(t, cols, 24)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join(args, "\n"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	s := &ptySession{cmd: cmd, master: master, read: make(chan struct{})}
	go func() {
		defer close(s.read)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			s.mu.Lock()
			s.out.Write(buf[:n])
			s.mu.Unlock()
			if err != nil {
				return // EIO once pdq has exited and the slave is closed
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		master.Close()
	})
	return s
}

func (s *ptySession) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// wait waits for pdq to exit and returns its exit status and everything it drew.
func (s *ptySession) wait(t *testing.T) (int, string) {
	t.Helper()
	err := s.cmd.Wait()
	select {
	case <-s.read:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal did not close after pdq exited")
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, s.output()
}

// screen replays terminal output the way a terminal of a fixed width shows it: carriage return,
// line feed, erase in line (ESC [ K, ESC [ 2 K), and automatic wrapping at the right margin,
// which it counts: a progress line that wraps is what makes every redraw scroll.
type screen struct {
	width int
	lines [][]rune
	row   int
	col   int
	cont  map[int]bool // rows that continue the row above (wrapped at the margin)
}

func newScreen(width int, out string) *screen {
	s := &screen{width: width, lines: [][]rune{nil}, cont: map[int]bool{}}
	for i := 0; i < len(out); {
		switch c := out[i]; {
		case c == '\r':
			s.col = 0
			i++
		case c == '\n':
			s.newline()
			i++
		case c == 0x1b && i+1 < len(out) && out[i+1] == '[':
			j := i + 2
			for j < len(out) && (out[j] >= '0' && out[j] <= '9' || out[j] == ';') {
				j++
			}
			if j < len(out) && out[j] == 'K' {
				line := s.lines[s.row]
				if out[i+2:j] == "2" {
					s.lines[s.row] = nil
				} else if s.col < len(line) {
					s.lines[s.row] = line[:s.col]
				}
			}
			i = j + 1
		case c < 0x20:
			i++
		default:
			r, n := utf8.DecodeRuneInString(out[i:])
			if s.col == s.width {
				s.newline()
				s.cont[s.row] = true
			}
			line := s.lines[s.row]
			for len(line) <= s.col {
				line = append(line, ' ')
			}
			line[s.col] = r
			s.lines[s.row] = line
			s.col++
			i += n
		}
	}
	return s
}

func (s *screen) newline() {
	s.row++
	s.col = 0
	if s.row == len(s.lines) {
		s.lines = append(s.lines, nil)
	}
}

// barWraps counts the progress lines (starting with prefix) that wrapped onto a second row.
func (s *screen) barWraps(prefix string) int {
	n := 0
	for i, l := range s.lines {
		if strings.HasPrefix(string(l), prefix) && s.cont[i+1] {
			n++
		}
	}
	return n
}

// text is the screen's lines, a wrapped line joined again.
func (s *screen) text() []string {
	var out []string
	for i, l := range s.lines {
		if s.cont[i] && len(out) > 0 {
			out[len(out)-1] += string(l)
			continue
		}
		out = append(out, strings.TrimRight(string(l), " "))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// TestTerminalSession is convert, Ctrl-C and the rerun on an 80-column terminal, then a run on a
// 200-column one: the bar stays on one line that fits the width and is redrawn in place, an
// interrupt leaves it where it was before "interrupted", and the rerun says what it resumes.
func TestTerminalSession(t *testing.T) {
	if testing.Short() {
		t.Skip("converts a 96 MiB checkpoint three times")
	}
	dir := t.TempDir()
	src, out := filepath.Join(dir, "src"), filepath.Join(dir, "out")
	if _, errOut, code := runMain(t, "testdata", "gen", "--out", src, "--fp8", "--size", "96MiB"); code != 0 {
		t.Fatal(errOut)
	}
	args := []string{"convert", src, "--out", out, "--workers", "1", "--max-shard-size", "2MiB"}

	// 1. Ctrl-C once the bar is drawn and a few decode shards are finished.
	s := startPTY(t, 80, args...)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		j, _ := os.ReadFile(filepath.Join(out, convert.JournalName))
		if strings.Count(string(j), `"key":"decode/`) >= 2 && strings.Contains(s.output(), "%") {
			break
		}
		exited := false
		select {
		case <-s.read: // the terminal closed: pdq finished before the test could interrupt it
			exited = true
		default:
		}
		if exited || time.Now().After(deadline) {
			t.Fatalf("no progress to interrupt; drawn so far:\n%q", s.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := s.master.Write([]byte{3}); err != nil { // Ctrl-C, through the terminal
		t.Fatal(err)
	}
	code, raw := s.wait(t)
	scr := newScreen(80, raw)
	lines := scr.text()
	t.Logf("screen after Ctrl-C:\n%s", strings.Join(lines, "\n"))
	if code != exitInterrupted {
		t.Errorf("exit %d after Ctrl-C, want %d", code, exitInterrupted)
	}
	if scr.barWraps("convert [") != 0 {
		t.Errorf("%d lines wrapped at 80 columns", scr.barWraps("convert ["))
	}
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "convert [cpu]") || !strings.HasPrefix(lines[1], "pdq convert: interrupted; rerun the same command to resume") {
		t.Fatalf("want the bar on one line, then the interruption; screen:\n%s", strings.Join(lines, "\n"))
	}
	if strings.Contains(lines[0], "100%") || strings.Contains(raw, "100%") {
		t.Errorf("the bar jumped to 100%%: %q", lines[0])
	}
	// The total in IEC units, as progressbar/v3 writes it: "(12/96 MiB, 3.1 MiB/s)".
	total := regexp.MustCompile(`/(\d+(?:\.\d+)? [KMG]iB)`).FindStringSubmatch(lines[0])
	if redraws := strings.Count(raw, "\r"); redraws < 2 {
		t.Errorf("the bar was drawn %d times; want redraws in place", redraws)
	}

	// 2. The same command again resumes and finishes.
	s = startPTY(t, 80, args...)
	code, raw = s.wait(t)
	scr = newScreen(80, raw)
	lines = scr.text()
	t.Logf("screen of the rerun:\n%s", strings.Join(lines, "\n"))
	if code != 0 {
		t.Fatalf("rerun: exit %d", code)
	}
	if scr.barWraps("convert [") != 0 {
		t.Errorf("rerun: %d lines wrapped at 80 columns", scr.barWraps("convert ["))
	}
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "resuming: ") || !strings.Contains(lines[0], "decode shards") ||
		!strings.HasSuffix(lines[0], "already done (verified)") || !strings.HasPrefix(lines[1], "convert [cpu] ") || !strings.Contains(lines[1], " 100% [") {
		t.Errorf("rerun: want the resume line, then the bar at 100%%; screen:\n%s", strings.Join(lines, "\n"))
	}
	if !strings.Contains(raw, "wrote "+filepath.Join(out, "prefill")) {
		t.Errorf("rerun: no completion summary")
	}
	// The bar counts only the work left.
	if len(lines) > 1 && (total == nil || strings.Contains(lines[1], "/"+total[1])) {
		t.Errorf("rerun: the bar counts the whole conversion again (%v): %q", total, lines[1])
	}

	// 3. At 200 columns the whole line fits with the tensor name in full.
	s = startPTY(t, 200, append(args, "--force")...)
	code, raw = s.wait(t)
	scr = newScreen(200, raw)
	lines = scr.text()
	// The finished line ends with the rate and the time taken: "(96/96 MiB, 12 MiB/s) [8s]".
	if code != 0 || scr.barWraps("convert [") != 0 || len(lines) == 0 || !strings.HasPrefix(lines[0], "convert [cpu] ") ||
		!strings.Contains(lines[0], " 100% [") || !regexp.MustCompile(`iB/s\) \[\d+(\.\d+)?[hms]`).MatchString(lines[0]) ||
		strings.Contains(lines[0], "…") {
		t.Errorf("200 columns: exit %d, %d wrapped; screen:\n%s", code, scr.barWraps("convert ["), strings.Join(lines, "\n"))
	}
}
