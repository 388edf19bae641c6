package fsutil

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// ErrLocked: another process holds the lock.
var ErrLocked = errors.New("in use by another process")

// Lock takes an exclusive advisory lock (flock) on the file at path, creating it, without
// waiting: when another process holds it, it fails with ErrLocked and says who (the holder
// writes its process ID, host and start time into the file). unlock releases the lock and
// removes the file. The lock is released by the kernel if the process dies, so a crash never
// leaves a directory locked.
func Lock(path string) (unlock func(), err error) {
	for range 10 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			holder, _ := os.ReadFile(path)
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				who := strings.TrimSpace(string(holder))
				if who == "" {
					who = "a process that has just started"
				}
				return nil, fmt.Errorf("%s: %w (%s)", path, ErrLocked, who)
			}
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		// The holder before us may have removed the file after we opened it: the lock must be
		// on the file the path names now.
		fi, err1 := f.Stat()
		pi, err2 := os.Stat(path)
		if err1 != nil || err2 != nil || !os.SameFile(fi, pi) {
			f.Close()
			continue
		}
		host, _ := os.Hostname()
		f.Truncate(0)
		fmt.Fprintf(f, "pid %d on %s since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
		return func() {
			os.Remove(path)
			f.Close()
		}, nil
	}
	return nil, fmt.Errorf("lock %s: the lock file keeps being replaced", path)
}
