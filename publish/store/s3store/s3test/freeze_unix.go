//go:build unix

package s3test

import (
	"syscall"
	"testing"
)

// Freeze stops the server process (SIGSTOP): it keeps its connections and its port, the
// kernel still accepts connections for it, and it answers nothing until Thaw. A frozen server
// is thawed when the test ends.
func (s *Server) Freeze(t testing.TB) {
	t.Helper()
	if err := s.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("s3test: freeze: %v", err)
	}
	t.Cleanup(func() { s.proc.Signal(syscall.SIGCONT) })
}

// Thaw lets a frozen server run again (SIGCONT).
func (s *Server) Thaw(t testing.TB) {
	t.Helper()
	if err := s.proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("s3test: thaw: %v", err)
	}
}
