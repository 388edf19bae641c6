package publish

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"

	"pdq/internal/par"
	"pdq/publish/store"
	"pdq/publish/zipnn"
)

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// Deep downloads and hashes every object (and decompresses compressed ones) instead of
	// trusting the size and checksum metadata the store keeps.
	Deep bool
	// Parallel bounds the objects checked at once (default DefaultParallel).
	Parallel int
	// Progress receives byte counts of a deep check (optional).
	Progress Progress
}

// FileCheck is the verdict on one file.
type FileCheck struct {
	Path string `json:"path"`
	Key  string `json:"key"`
	OK   bool   `json:"ok"`
	// Problem says what is wrong, when not OK.
	Problem string `json:"problem,omitempty"`
}

// VerifyResult lists every file's verdict.
type VerifyResult struct {
	URL      string      `json:"url"`
	Deep     bool        `json:"deep"`
	OK       bool        `json:"ok"`
	Files    []FileCheck `json:"files"`
	Problems int         `json:"problems"`
	Manifest *Manifest   `json:"manifest"`
}

// Verify checks the version in st against its manifest. Without Deep it asks the store for each
// object's size and the SHA-256 metadata written when it was uploaded (no object is read): this
// finds missing, truncated or replaced objects, not bytes damaged in place. With Deep it reads
// every object, hashes it and, for compressed files, decompresses it and hashes the original
// bytes. It returns the result and, when anything is wrong, an error wrapping ErrVerify.
func Verify(ctx context.Context, st store.Store, opts VerifyOptions) (*VerifyResult, error) {
	if opts.Parallel <= 0 {
		opts.Parallel = DefaultParallel
	}
	if opts.Progress == nil {
		opts.Progress = noProgress{}
	}
	m, _, err := ReadManifest(ctx, st)
	if err != nil {
		return nil, err
	}
	res := &VerifyResult{URL: st.String(), Deep: opts.Deep, Files: make([]FileCheck, len(m.Files)), Manifest: m}
	if opts.Deep {
		var total int64
		for _, f := range m.Files {
			total += f.StoredSize
		}
		opts.Progress.AddTotal(total)
	}
	// A store error stops the check (the lowest file's error is reported); a mismatch is a
	// problem of that file and the others are still checked.
	err = par.ForEach(ctx, len(m.Files), opts.Parallel, func(i int) error {
		f := m.Files[i]
		check := FileCheck{Path: f.Path, Key: f.Key}
		var problem string
		var err error
		if opts.Deep {
			problem, err = deepCheck(ctx, st, f, opts.Progress)
		} else {
			problem, err = quickCheck(ctx, st, m.Format, f)
		}
		check.OK, check.Problem = problem == "" && err == nil, problem
		res.Files[i] = check
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, c := range res.Files {
		if !c.OK {
			res.Problems++
		}
	}
	res.OK = res.Problems == 0
	if !res.OK {
		return res, fmt.Errorf("%w: %d of %d files of %s do not match the manifest", ErrVerify, res.Problems, len(res.Files), st)
	}
	return res, nil
}

// quickCheck compares an object's size and checksum metadata with the manifest. An uncompressed
// object of format 3 sent in parts has no sha256 metadata (its upload began before the file was
// hashed): its size metadata stands in. A problem is a verdict; an error means the check could
// not be made (credentials, network).
func quickCheck(ctx context.Context, st store.Store, format string, f File) (string, error) {
	info, err := st.Stat(ctx, f.Key)
	if errors.Is(err, store.ErrNotExist) {
		return "missing", nil
	}
	if err != nil {
		return "", err
	}
	if info.Size != f.StoredSize {
		return fmt.Sprintf("size %d, manifest says %d", info.Size, f.StoredSize), nil
	}
	got := info.Metadata[metaSHA256]
	if got == "" && format == ManifestFormat && f.Compression == CompressionNone && info.Metadata[metaSize] == strconv.FormatInt(f.Size, 10) {
		// Sent in parts while it was hashed: its upload began before its SHA-256 was known.
		return "", nil
	}
	if got == "" {
		return "the store keeps no sha256 for it (was it replaced?); check with --deep", nil
	}
	if got != f.SHA256 {
		return fmt.Sprintf("sha256 metadata %s, manifest says %s", got, f.SHA256), nil
	}
	if f.Compression == CompressionZipNN && info.Metadata[metaStoredSHA256] != f.StoredSHA256 {
		return fmt.Sprintf("stored-sha256 metadata %q, manifest says %s", info.Metadata[metaStoredSHA256], f.StoredSHA256), nil
	}
	return "", nil
}

// deepCheck reads the whole object, hashing it (and its decompressed bytes).
func deepCheck(ctx context.Context, st store.Store, f File, p Progress) (string, error) {
	rc, err := st.GetRange(ctx, f.Key, 0, -1)
	if errors.Is(err, store.ErrNotExist) {
		return "missing", nil
	}
	if err != nil {
		return "", err
	}
	defer rc.Close()
	stored := sha256.New()
	counted := &progressWriter{w: stored, p: p}
	body := io.TeeReader(rc, counted)
	var n int64
	rawSHA := ""
	if f.Compression == CompressionZipNN {
		raw := sha256.New()
		n, err = zipnn.Decompress(ctx, raw, body, zipnn.Options{CheckSize: true, Size: f.Size})
		if err != nil && ctx.Err() == nil && !errors.Is(err, zipnn.ErrFormat) && !errors.Is(err, zipnn.ErrChecksum) {
			return "", err
		}
		if err != nil {
			io.Copy(io.Discard, body) // finish the stored hash for the message
			return fmt.Sprintf("does not decompress: %v", err), nil
		}
		rawSHA = hex.EncodeToString(raw.Sum(nil))
	} else {
		bp := readBufs.Get().(*[]byte)
		defer readBufs.Put(bp)
		if n, err = io.CopyBuffer(io.Discard, body, *bp); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Sprintf("truncated: %v", err), nil
			}
			return "", err
		}
		rawSHA = hex.EncodeToString(stored.Sum(nil))
	}
	if got := hex.EncodeToString(stored.Sum(nil)); got != f.storedSHA256() {
		return fmt.Sprintf("stored bytes have sha256 %s, manifest says %s", got, f.storedSHA256()), nil
	}
	if n != f.Size || rawSHA != f.SHA256 {
		return fmt.Sprintf("content is %d bytes with sha256 %s, manifest says %d and %s", n, rawSHA, f.Size, f.SHA256), nil
	}
	return "", nil
}
