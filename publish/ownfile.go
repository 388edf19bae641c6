package publish

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Pull's working files are its own: created fresh, never opened for writing when something else
// might be under the name. A hard link planted in the working folder (to a file outside it) or a
// symbolic link is removed and replaced, never written through.

// createFresh removes whatever has the name and creates an empty file in its place, with O_EXCL
// so that nothing can slip in between.
func createFresh(root *os.Root, name string, flag int) (*os.File, error) {
	if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return root.OpenFile(name, flag|os.O_CREATE|os.O_EXCL, 0o644)
}

// errNotOwn: a working file is not a plain file of pull's own.
var errNotOwn = errors.New("not a regular file with one link")

// openOwn opens an existing file only if it is a regular file (not a symbolic link, FIFO or
// device) with a single link, and the file opened is the one looked at. The open does not block
// on a FIFO.
func openOwn(root *os.Root, name string, flag int) (*os.File, error) {
	li, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !li.Mode().IsRegular() || linkCount(li) != 1 {
		return nil, fmt.Errorf("%s: %w", name, errNotOwn)
	}
	f, err := root.OpenFile(name, flag|nonBlock, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil || !os.SameFile(li, fi) {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, errNotOwn)
	}
	return f, nil
}

// readOwn reads a small working file (at most limit bytes) that openOwn accepts.
func readOwn(root *os.Root, name string, limit int64) ([]byte, error) {
	f, err := openOwn(root, name, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}
