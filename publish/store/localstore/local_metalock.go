package localstore

import (
	"os"
	"sync"
)

// metaLocks holds one mutex per local store root: an object's rename into place and its sidecar
// write happen under it, as do Stat's look at both, so no Stat sees an object without the
// metadata its writer gave it (two publishers of the same content write the same keys at once).
var metaLocks sync.Map // root -> *sync.Mutex

// lockMeta takes the store's metadata lock, within this process and (where the system has
// advisory file locks) across processes, and returns its release. A writer (create) makes the
// lock file; a reader only locks one that exists, so looking at a store never writes to it.
func (l *Local) lockMeta(create bool) func() {
	m, _ := metaLocks.LoadOrStore(l.root, new(sync.Mutex))
	mu := m.(*sync.Mutex)
	mu.Lock()
	var f *os.File
	var err error
	if create {
		if err = os.MkdirAll(l.state(), 0o755); err == nil {
			f, err = os.OpenFile(l.state("meta.lock"), os.O_RDWR|os.O_CREATE, 0o644)
		}
	} else {
		f, err = os.Open(l.state("meta.lock"))
	}
	if err == nil && flockExclusive(f) != nil {
		f.Close()
		err = os.ErrInvalid
	}
	if err != nil {
		f = nil
	}
	return func() {
		if f != nil {
			f.Close() // closing drops the file lock
		}
		mu.Unlock()
	}
}
