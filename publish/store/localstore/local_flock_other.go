//go:build !unix

package localstore

import "os"

// flockExclusive: no advisory file locks here; the in-process lock alone orders writers.
func flockExclusive(*os.File) error { return nil }
