package publish

import (
	"errors"
	"strings"
	"testing"
)

// FuzzStoreURL: any argument is a plain path or a URL-like one; a URL-like one that is not
// s3:// or file:// gets an ErrBadURL explanation (never a panic), and one written ./ never
// starts like a URL.
func FuzzStoreURL(f *testing.F) {
	for _, s := range []string{"s3:/b/x", "s3:", "S3:b", "file:/x", "gs://b", "C:\\x", "a:b", "./s3:x", "/abs:x", "rel/a:b", "+x:y", "h-t.t+p:z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		scheme := urlScheme(s)
		if strings.HasPrefix(s, "./") || strings.HasPrefix(s, "/") {
			if scheme != "" {
				t.Fatalf("%q: scheme %q", s, scheme)
			}
		}
		if scheme == "" {
			return
		}
		if !IsStoreURL(s) {
			t.Fatalf("%q starts like a URL but IsStoreURL says no", s)
		}
		if strings.HasPrefix(s, "s3://") || strings.HasPrefix(s, "file://") {
			return
		}
		if err := badURL(s); !errors.Is(err, ErrBadURL) {
			t.Fatalf("%q: %v", s, err)
		}
	})
}
