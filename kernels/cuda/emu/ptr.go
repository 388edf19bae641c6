//go:build cudaemu

package emu

import "unsafe"

// ptr returns the address of the first byte of a non-empty slice.
func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
