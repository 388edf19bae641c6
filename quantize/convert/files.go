package convert

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"pdq/internal/fsutil"
)

// copySource copies or links an FP8 source's shards into prefill/ unchanged. It runs beside the
// conversion (the disk is idle while the CPU quantizes) and hashes while it copies, so each byte
// is read once.
func (r *runner) copySource(ctx context.Context) error {
	dst := filepath.Join(r.dir, "prefill")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	for _, s := range r.plan.Source.Shards {
		key := "prefill/" + s.Name
		if r.own != nil && !r.own[key] {
			continue // another part's
		}
		r.jmu.Lock()
		_, done := r.journal.Shards[key]
		r.jmu.Unlock()
		if done {
			continue
		}
		size, crc, err := copyHashed(ctx, s.Path, filepath.Join(dst, s.Name), r.ro.PrefillMode == PrefillLink)
		if err != nil {
			return err
		}
		r.jmu.Lock()
		err = r.journal.add(r.dir, key, &finishedShard{Size: size, CRC32C: &crc})
		r.jmu.Unlock()
		if err != nil {
			return err
		}
		r.ro.Events.shardDone(KindPrefill, s.Name, size)
	}
	return nil
}

// copyHashed makes dst a copy of src under a temporary name, taking the CRC-32C of the bytes as
// they pass, and renames it when complete; with link set it tries a hard link first (same
// filesystem), then checksums the linked file. The copy stops at the next 1 MiB chunk when ctx
// is cancelled; it writes around the page cache where the file system allows (fsutil.CopyAtomic).
func copyHashed(ctx context.Context, src, dst string, link bool) (int64, uint32, error) {
	if link {
		tmp := fsutil.PartialName(dst)
		os.Remove(tmp)
		target := src
		if t, err := filepath.EvalSymlinks(src); err == nil {
			target = t // link the file itself: a hard link to a relative symbolic link dangles here
		}
		if err := os.Link(target, tmp); err == nil {
			if err := os.Rename(tmp, dst); err != nil {
				os.Remove(tmp)
				return 0, 0, fmt.Errorf("convert: link %s: %w", src, err)
			}
			return crcFile(ctx, dst)
		}
		slog.Info("hard link not possible; copying", "src", src)
	}
	in, err := os.Open(src)
	if err != nil {
		return 0, 0, fmt.Errorf("convert: %w", err)
	}
	defer in.Close()
	h := fsutil.CRC32C()
	n, err := fsutil.CopyAtomic(ctx, dst, 0o644, in, h)
	if err != nil {
		return 0, 0, convertErr(err)
	}
	return n, h.Sum32(), nil
}

// copyFile makes dst a copy of src (temporary name, then rename), with src's permission bits
// at most 0644: a copy is never readable by more users than its source.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
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
