//go:build !unix

package store

import "os"

// flockExclusive: no advisory file locks here; the in-process lock alone orders writers.
func flockExclusive(*os.File) error { return nil }
