package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"

	"pdq/publish/store"
	"pdq/publish/store/s3store"
)

// StoreOptions reach a store.
type StoreOptions struct {
	// Endpoint and Region override the AWS defaults for s3:// URLs.
	Endpoint, Region string
	// MaxConns is the number of connections to keep (set it to the parallelism).
	MaxConns int
}

// IsStoreURL reports whether arg is a store URL (s3:// or file://) rather than a plain path.
func IsStoreURL(arg string) bool {
	return strings.HasPrefix(arg, "s3://") || strings.HasPrefix(arg, "file://")
}

// OpenStore returns the store of a URL: s3://bucket/prefix, file:///abs/path, or a plain
// directory path.
func OpenStore(ctx context.Context, raw string, opts StoreOptions) (store.Store, error) {
	switch {
	case strings.HasPrefix(raw, "s3://"):
		bucket, prefix, err := s3store.ParseURL(raw)
		if err != nil {
			return nil, err
		}
		return s3store.New(ctx, s3store.Config{
			Bucket: bucket, Prefix: prefix, Endpoint: opts.Endpoint, Region: opts.Region, MaxConns: opts.MaxConns,
		})
	case strings.HasPrefix(raw, "file://"):
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("publish: %q: %w", raw, err)
		}
		if u.Host != "" && u.Host != "localhost" || !filepath.IsAbs(filepath.FromSlash(u.Path)) || u.RawQuery != "" {
			return nil, fmt.Errorf("publish: %q: want file:///absolute/path", raw)
		}
		return store.NewLocal(filepath.FromSlash(u.Path))
	case strings.Contains(raw, "://"):
		return nil, fmt.Errorf("publish: %q: unsupported scheme (use s3://bucket/prefix, file:///path or a directory)", raw)
	}
	return store.NewLocal(raw)
}

// ReadManifest fetches and checks the manifest of the version in st, returning its raw bytes too.
func ReadManifest(ctx context.Context, st store.Store) (*Manifest, []byte, error) {
	rc, err := st.GetRange(ctx, ManifestKey, 0, -1)
	if errors.Is(err, store.ErrNotExist) {
		return nil, nil, fmt.Errorf("%w: no %s at %s (never published, or the publish did not finish)", ErrNotPublished, ManifestKey, st)
	}
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxManifest+1))
	if err != nil {
		return nil, nil, fmt.Errorf("publish: read %s of %s: %w", ManifestKey, st, err)
	}
	if len(b) > maxManifest {
		return nil, nil, fmt.Errorf("%w: %s of %s is over %d bytes", ErrManifest, ManifestKey, st, maxManifest)
	}
	m, err := ParseManifest(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s/%s: %w", st, ManifestKey, err)
	}
	return m, b, nil
}
