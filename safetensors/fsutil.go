package safetensors

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// syncDir flushes a directory entry change (a rename) to disk. File systems that cannot sync a
// directory (EINVAL, ENOTSUP) are accepted as they are.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
		return nil
	}
	return err
}

// writeFileAtomic writes data to path through ".NAME.partial" in the same directory: write, sync,
// rename, sync the directory. On failure the temporary file is removed and path is untouched.
func writeFileAtomic(path string, data []byte) error {
	temp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".partial")
	f, err := os.OpenFile(temp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(temp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		os.Remove(temp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
