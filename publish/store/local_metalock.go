package store

import (
	"os"
	"sync"
)

// metaLocks holds one mutex per local store root: an object's rename into place and its sidecar
// write happen under it, as do Stat's look at both, so no Stat sees an object without the
// metadata its writer gave it (two publishers of the same content write the same keys at once).
var metaLocks sync.Map // root -> *sync.Mutex

// lockMeta takes the store's metadata lock, within this process and (where the system has
// advisory file locks) across processes, and returns its release.
func (l *Local) lockMeta() func() {
	m, _ := metaLocks.LoadOrStore(l.root, new(sync.Mutex))
	mu := m.(*sync.Mutex)
	mu.Lock()
	var f *os.File
	if err := os.MkdirAll(l.state(), 0o755); err == nil {
		if f, err = os.OpenFile(l.state("meta.lock"), os.O_RDWR|os.O_CREATE, 0o644); err == nil {
			if flockExclusive(f) != nil {
				f.Close()
				f = nil
			}
		}
	}
	return func() {
		if f != nil {
			f.Close() // closing drops the file lock
		}
		mu.Unlock()
	}
}
