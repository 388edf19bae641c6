package safetensors

import "pdq/internal/fsutil"

// syncDir and writeFileAtomic are the shared fsutil helpers under this package's names.
var syncDir = fsutil.SyncDir

func writeFileAtomic(path string, data []byte) error { return fsutil.WriteFileAtomic(path, data) }
