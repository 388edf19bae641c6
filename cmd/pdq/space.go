package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"

	"pdq/internal/fsutil"
	"pdq/quantize/convert"
)

// freeBytes is fsutil.FreeBytes (a variable for the tests, which cannot fill a disk).
var freeBytes = fsutil.FreeBytes

// errNoSpace: the output's file system has less free space than the conversion still writes.
var errNoSpace = errors.New("not enough free space")

// planWrites is what a whole conversion writes: every output it writes tensor by tensor, and a
// copy of an FP8 source's shards (prefill/) only under mode write: copied or linked, it may be
// cloned or hard-linked and take no space, and only the run knows.
func planWrites(p *convert.Plan, mode convert.PrefillMode) int64 {
	var n int64
	for _, o := range p.Outputs {
		if !o.CopySource || mode == convert.PrefillWrite {
			n += o.Bytes(p.Source)
		}
	}
	return n
}

// dirBytes is the size of the regular files under dir (0 when it does not exist).
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// checkSpace refuses a whole conversion into out when its file system has less free space than
// the conversion still writes (a resume counts what is there). Parts share the directory and are
// not checked; nor is a file system whose free space is unknown.
func checkSpace(p *convert.Plan, out string, part convert.Part, mode convert.PrefillMode) error {
	if !part.Whole() {
		return nil
	}
	free, err := freeBytes(out)
	if err != nil {
		return nil
	}
	need := planWrites(p, mode)
	have := dirBytes(filepath.Join(out, "prefill")) + dirBytes(filepath.Join(out, "decode"))
	if need-have > free {
		return fmt.Errorf("%s: %w: the conversion writes %s (%s of it there already), %s free", out, errNoSpace,
			formatBytes(need), formatBytes(min(have, need)), formatBytes(free))
	}
	return nil
}

// withSpace adds to an out-of-space error what the conversion writes (need) and what is free now.
func withSpace(err error, need int64, out string) error {
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return err
	}
	free, ferr := freeBytes(out)
	if ferr != nil {
		return fmt.Errorf("%w (the conversion writes %s)", err, formatBytes(need))
	}
	return fmt.Errorf("%w (the conversion writes %s; %s free now on %s)", err, formatBytes(need), formatBytes(free), out)
}
