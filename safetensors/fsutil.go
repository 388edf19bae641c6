package safetensors

import "pdq/internal/fsutil"

// writeFileAtomic is the shared fsutil helper under this package's name.
func writeFileAtomic(path string, data []byte) error { return fsutil.WriteFileAtomic(path, data) }
