//go:build darwin || freebsd || netbsd

package publish

import "syscall"

// changeNs returns a file's status-change time in nanoseconds.
func changeNs(st *syscall.Stat_t) (int64, bool) { return st.Ctimespec.Nano(), true }
