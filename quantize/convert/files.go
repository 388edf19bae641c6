package convert

import (
	"context"
	"fmt"
	"io"

	"pdq/internal/fsutil"
)

// copyFile makes dst a copy of src (temporary name, then rename), with src's permission bits
// at most 0644: a copy is never readable by more users than its source.
func copyFile(src, dst string) error {
	in, err := fsutil.OpenRegular(src) // a FIFO put in a side file's place is refused, not waited on
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	return convertErr(fsutil.WriteAtomicPerm(dst, fi.Mode().Perm()&0o644, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	}))
}

// writeFileAtomic and writeAtomic are fsutil's, with convert's error prefix.
func writeFileAtomic(path string, data []byte) error {
	return convertErr(fsutil.WriteFileAtomic(path, data))
}

func writeAtomic(path string, fill func(io.Writer) error) error {
	return convertErr(fsutil.WriteAtomic(path, fill))
}

// crcFile returns the size and CRC-32C of a file (the journal's check of finished shards).
func crcFile(ctx context.Context, path string) (int64, uint32, error) {
	n, sum, err := fsutil.CRCFile(ctx, path)
	return n, sum, convertErr(err)
}

// hashFile returns the size and SHA-256 of a file.
func hashFile(ctx context.Context, path string) (int64, string, error) {
	n, sum, err := fsutil.HashFile(ctx, path)
	return n, sum, convertErr(err)
}

func convertErr(err error) error {
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	return nil
}
