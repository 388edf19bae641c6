package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"pdq/publish/store"
	"pdq/publish/store/localstore"
	"pdq/publish/store/s3store"
)

// StoreOptions reach a store.
type StoreOptions struct {
	// Endpoint and Region override the AWS defaults for s3:// URLs.
	Endpoint, Region string
	// MaxConns is the number of connections to keep (set it to the parallelism).
	MaxConns int
	// Timeout is the idle timeout of an S3 request: one that sends and receives nothing for this
	// long fails (tried up to three times, then an error wrapping store.ErrStalled). Zero means
	// DefaultTimeout; a negative value, no limit.
	Timeout time.Duration
}

// DefaultTimeout is the idle timeout of S3 requests when StoreOptions.Timeout is zero.
const DefaultTimeout = s3store.DefaultTimeout

// ErrBadURL marks a store argument that looks like a URL but is not one pdq can use: a scheme it
// does not know, or a known one misspelled (s3:/bucket, s3:bucket, file:relative). Such an
// argument is never taken for a local directory.
var ErrBadURL = errors.New("publish: not a usable store URL")

// IsStoreURL reports whether arg is meant as a store URL rather than a plain path: s3:// or
// file://, or anything that starts like a URL (a scheme and a colon before the first slash),
// which OpenStore refuses unless it is well formed.
func IsStoreURL(arg string) bool {
	return strings.HasPrefix(arg, "s3://") || strings.HasPrefix(arg, "file://") || urlScheme(arg) != ""
}

// urlScheme returns the scheme of an argument that starts like a URL ("s3" for "s3:/b/x",
// "gs" for "gs://b"), or "" for a plain path. A scheme is a letter, then letters, digits, '+',
// '-' or '.', then a colon before any slash. One letter is not a scheme on Windows (C:\x).
func urlScheme(arg string) string {
	i := strings.IndexByte(arg, ':')
	if i <= 0 || strings.IndexByte(arg[:i], '/') >= 0 || runtime.GOOS == "windows" && i == 1 {
		return ""
	}
	for j, c := range arg[:i] {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (j == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return ""
		}
	}
	return strings.ToLower(arg[:i])
}

// badURL explains why raw, which starts like a URL, is not a store URL, with the spelling it
// probably meant.
func badURL(raw string) error {
	scheme := urlScheme(raw)
	rest := strings.TrimLeft(raw[len(scheme)+1:], "/")
	use := "use s3://bucket/prefix, file:///absolute/path or a directory"
	if !strings.Contains(raw, "://") {
		use += "; for a local directory whose name has a colon write ./" + raw
	}
	switch scheme {
	case "s3":
		return fmt.Errorf("%w: %s: did you mean %s? (%s)", ErrBadURL, quote(raw), quote("s3://"+rest), use)
	case "file":
		return fmt.Errorf("%w: %s: did you mean %s? (%s)", ErrBadURL, quote(raw), quote("file:///"+rest), use)
	}
	return fmt.Errorf("%w: %s: unsupported scheme %s (%s)", ErrBadURL, quote(raw), quote(scheme+":"), use)
}

// OpenStore returns the store of a URL: s3://bucket/prefix, file:///abs/path, or a plain
// directory path.
func OpenStore(ctx context.Context, raw string, opts StoreOptions) (store.Store, error) {
	switch {
	case strings.HasPrefix(raw, "s3://"):
		bucket, prefix, err := s3store.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
		}
		return s3store.New(ctx, s3store.Config{
			Bucket: bucket, Prefix: prefix, Endpoint: opts.Endpoint, Region: opts.Region, MaxConns: opts.MaxConns,
			Timeout: opts.Timeout,
		})
	case strings.HasPrefix(raw, "file://"):
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadURL, quote(raw), err)
		}
		if u.Host != "" && u.Host != "localhost" || !filepath.IsAbs(filepath.FromSlash(u.Path)) || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("%w: %s: want file:///absolute/path", ErrBadURL, quote(raw))
		}
		return localstore.New(filepath.FromSlash(u.Path))
	case urlScheme(raw) != "":
		return nil, badURL(raw)
	}
	return localstore.New(raw)
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
