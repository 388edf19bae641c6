package fsutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNotRegular: a path that must be a regular file is a FIFO, device, socket or directory.
// Such files are never read: a FIFO would block the reader forever.
var ErrNotRegular = errors.New("not a regular file")

// ErrFileTooLarge: a file read whole into memory is over its documented limit.
var ErrFileTooLarge = errors.New("file over the size limit")

// OpenRegular opens name for reading only if it is a regular file (symbolic links followed). The
// open itself never blocks: it is made non-blocking, so that a FIFO put in the file's place
// between a check and the open is refused rather than waited on. Errors wrap ErrNotRegular or the
// open's error (fs.ErrNotExist, ...).
func OpenRegular(name string) (*os.File, error) {
	f, err := openNonBlocking(name)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w (%s)", name, ErrNotRegular, fileKind(fi.Mode()))
	}
	return f, nil
}

// ReadRegularFile reads the whole of name, a regular file of at most limit bytes; over the limit
// it fails with ErrFileTooLarge, reading no more than limit+1 bytes.
func ReadRegularFile(name string, limit int64) ([]byte, error) {
	f, err := OpenRegular(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > limit {
		return nil, fmt.Errorf("%s: %w: %d bytes, the limit is %d", name, ErrFileTooLarge, fi.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w: over %d bytes", name, ErrFileTooLarge, limit)
	}
	return b, nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return "mode " + m.String()
}
