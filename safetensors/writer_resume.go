package safetensors

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"

	"pdq/internal/fsutil"
)

// ErrNoPartial: there is no usable temporary file to resume (missing, not a plain file of its
// own, or not laid out as the layout says).
var ErrNoPartial = errors.New("no resumable partial file")

// Resume reopens the temporary file that an interrupted Writer for path left (see Detach), for
// the same layout: its size and header must be the layout's, and it must be a regular file with
// no other link (a hard link planted under its name is never written through). The tensors in
// kept (name -> CRC-32C of its bytes) count as written; the caller has checked their bytes, and
// their checksums go into the file's (CRC32C after Close). Other tensors are written as with
// Create; their old bytes are overwritten.
func Resume(path string, layout *Layout, kept map[string]uint32) (*Writer, error) {
	if err := checkLayout(layout); err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	temp := fsutil.PartialName(path)
	fi, err := os.Lstat(temp)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w: %v", temp, ErrNoPartial, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !fi.Mode().IsRegular() || fi.Size() != layout.FileSize || ok && st.Nlink != 1 {
		return nil, fmt.Errorf("safetensors: %s: %w: not a plain file of the planned size", temp, ErrNoPartial)
	}
	f, err := os.OpenFile(temp, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w: %v", temp, ErrNoPartial, err)
	}
	head := make([]byte, len(layout.Prefix))
	if _, err := f.ReadAt(head, 0); err != nil || !bytes.Equal(head, layout.Prefix) {
		f.Close()
		return nil, fmt.Errorf("safetensors: %s: %w: its header is not the planned one", temp, ErrNoPartial)
	}
	w := newWriter(path, temp, layout, f)
	for name, crc := range kept {
		i, ok := w.index[name]
		if !ok {
			w.out.Close()
			f.Close()
			return nil, fmt.Errorf("safetensors: %s: tensor %q: %w: not in the layout", path, name, ErrWriteMismatch)
		}
		w.covered[i].Reset(layout.Tensors[i].ByteSize(), crc)
	}
	return w, nil
}

// Detach stops writing and closes the temporary file but leaves it in place, so that Resume can
// continue it (an interrupted run keeps the tensors it finished). Nothing appears at the path.
func (w *Writer) Detach() error {
	if !w.stop("detached") {
		return nil
	}
	w.out.Close()
	return w.f.Close()
}
