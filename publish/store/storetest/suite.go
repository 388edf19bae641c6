// Package storetest is the test suite every store.Store implementation must pass: it checks the
// contracts written on the interface, so that the local directory and the S3 store behave alike.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"pdq/publish/store"
)

// Run runs the suite. newStore returns an empty store for one subtest.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Missing", testMissing},
		{"PutStatGet", testPutStatGet},
		{"Ranges", testRanges},
		{"Replace", testReplace},
		{"IfNoneMatch", testIfNoneMatch},
		{"BadCRC", testBadCRC},
		{"ShortBody", testShortBody},
		{"ListDelete", testListDelete},
		{"InvalidKeys", testInvalidKeys},
		{"Multipart", testMultipart},
		{"MultipartResume", testMultipartResume},
		{"MultipartRules", testMultipartRules},
		{"MultipartAbort", testMultipartAbort},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the Castagnoli CRC of b.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func put(t *testing.T, s store.Store, key string, data []byte, opts store.PutOptions) {
	t.Helper()
	if err := s.Put(context.Background(), key, bytes.NewReader(data), int64(len(data)), opts); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func get(t *testing.T, s store.Store, key string, off, n int64) []byte {
	t.Helper()
	rc, err := s.GetRange(context.Background(), key, off, n)
	if err != nil {
		t.Fatalf("GetRange(%q, %d, %d): %v", key, off, n, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("GetRange(%q, %d, %d): read: %v", key, off, n, err)
	}
	return b
}

func wantNotExist(t *testing.T, s store.Store, key string) {
	t.Helper()
	if _, err := s.Stat(context.Background(), key); !errors.Is(err, store.ErrNotExist) {
		t.Fatalf("Stat(%q) = %v, want ErrNotExist", key, err)
	}
}

func testMissing(t *testing.T, s store.Store) {
	ctx := context.Background()
	wantNotExist(t, s, "nope/x.bin")
	if rc, err := s.GetRange(ctx, "nope/x.bin", 0, -1); !errors.Is(err, store.ErrNotExist) {
		if err == nil {
			rc.Close()
		}
		t.Fatalf("GetRange missing = %v, want ErrNotExist", err)
	}
	if err := s.Delete(ctx, "nope/x.bin"); err != nil {
		t.Fatalf("Delete missing = %v, want nil", err)
	}
}

func testPutStatGet(t *testing.T, s store.Store) {
	ctx := context.Background()
	data := randBytes(1, 100_000)
	md := map[string]string{"sha256": "abc123", "raw-size": "100000"}
	put(t, s, "dir/sub/a.bin", data, store.PutOptions{Metadata: md, CRC32C: CRC32C(data), HasCRC32C: true})
	info, err := s.Stat(ctx, "dir/sub/a.bin")
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != int64(len(data)) || info.Key != "dir/sub/a.bin" {
		t.Fatalf("Stat = %+v, want size %d", info, len(data))
	}
	for k, v := range md {
		if info.Metadata[k] != v {
			t.Fatalf("metadata %q = %q, want %q (all: %v)", k, info.Metadata[k], v, info.Metadata)
		}
	}
	if got := get(t, s, "dir/sub/a.bin", 0, -1); !bytes.Equal(got, data) {
		t.Fatalf("GetRange whole: %d bytes differ from the %d put", len(got), len(data))
	}
	put(t, s, "empty", nil, store.PutOptions{})
	if info, err := s.Stat(ctx, "empty"); err != nil || info.Size != 0 {
		t.Fatalf("Stat empty = %+v, %v", info, err)
	}
	if got := get(t, s, "empty", 0, 0); len(got) != 0 {
		t.Fatalf("empty object read %d bytes", len(got))
	}
}

func testRanges(t *testing.T, s store.Store) {
	data := randBytes(2, 50_000)
	put(t, s, "r.bin", data, store.PutOptions{})
	for _, rg := range [][2]int64{{0, 1}, {1, 999}, {49_999, 1}, {10_000, -1}, {0, 50_000}, {50_000, 0}, {25_000, 0}} {
		end := int64(len(data))
		if rg[1] >= 0 {
			end = rg[0] + rg[1]
		}
		if got := get(t, s, "r.bin", rg[0], rg[1]); !bytes.Equal(got, data[rg[0]:end]) {
			t.Errorf("GetRange(%d, %d): %d bytes, differ from the object's", rg[0], rg[1], len(got))
		}
	}
	// A range past the end must not read as a complete, shorter range.
	rc, err := s.GetRange(context.Background(), "r.bin", 49_000, 2_000)
	if err == nil {
		b, rerr := io.ReadAll(rc)
		rc.Close()
		if rerr == nil {
			t.Fatalf("GetRange past the end read %d bytes without error", len(b))
		}
	}
}

func testReplace(t *testing.T, s store.Store) {
	ctx := context.Background()
	put(t, s, "x", []byte("first"), store.PutOptions{Metadata: map[string]string{"sha256": "one"}})
	put(t, s, "x", []byte("second!"), store.PutOptions{Metadata: map[string]string{"sha256": "two"}})
	if got := get(t, s, "x", 0, -1); string(got) != "second!" {
		t.Fatalf("after replace read %q", got)
	}
	if info, _ := s.Stat(ctx, "x"); info.Metadata["sha256"] != "two" || info.Size != 7 {
		t.Fatalf("after replace Stat = %+v", info)
	}
	put(t, s, "x", []byte("third"), store.PutOptions{})
	if info, _ := s.Stat(ctx, "x"); info.Metadata["sha256"] != "" {
		t.Fatalf("replace without metadata kept old metadata %v", info.Metadata)
	}
}

func testIfNoneMatch(t *testing.T, s store.Store) {
	ctx := context.Background()
	put(t, s, "m.json", []byte(`{"v":1}`), store.PutOptions{IfNoneMatch: true})
	err := s.Put(ctx, "m.json", strings.NewReader(`{"v":2}`), 7, store.PutOptions{IfNoneMatch: true})
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("second conditional Put = %v, want ErrExists", err)
	}
	if got := get(t, s, "m.json", 0, -1); string(got) != `{"v":1}` {
		t.Fatalf("conditional Put changed the object to %q", got)
	}
}

func testBadCRC(t *testing.T, s store.Store) {
	data := randBytes(3, 4096)
	err := s.Put(context.Background(), "bad.bin", bytes.NewReader(data), int64(len(data)),
		store.PutOptions{CRC32C: CRC32C(data) ^ 1, HasCRC32C: true})
	if !errors.Is(err, store.ErrChecksum) {
		t.Fatalf("Put with wrong CRC32C = %v, want ErrChecksum", err)
	}
	wantNotExist(t, s, "bad.bin")
}

// shortReader claims to be seekable but ends early.
type shortReader struct{ *bytes.Reader }

func testShortBody(t *testing.T, s store.Store) {
	data := randBytes(4, 1000)
	err := s.Put(context.Background(), "short.bin", shortReader{bytes.NewReader(data)}, 2000, store.PutOptions{})
	if err == nil {
		t.Fatal("Put of a body shorter than its size succeeded")
	}
	wantNotExist(t, s, "short.bin")
}

func testListDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	keys := []string{"a/1", "a/2", "a/b/3", "b/4", "c"}
	for _, k := range keys {
		put(t, s, k, []byte(k), store.PutOptions{})
	}
	list := func(prefix string) []string {
		var got []string
		err := s.List(ctx, prefix, func(i store.Info) error {
			if i.Size != int64(len(i.Key)) {
				t.Errorf("List: %s has size %d", i.Key, i.Size)
			}
			got = append(got, i.Key)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(got)
		return got
	}
	if got := list(""); strings.Join(got, ",") != strings.Join(keys, ",") {
		t.Fatalf("List(\"\") = %v, want %v", got, keys)
	}
	if got := list("a/"); strings.Join(got, ",") != "a/1,a/2,a/b/3" {
		t.Fatalf("List(a/) = %v", got)
	}
	if err := s.Delete(ctx, "a/2"); err != nil {
		t.Fatal(err)
	}
	wantNotExist(t, s, "a/2")
	if got := list("a/"); strings.Join(got, ",") != "a/1,a/b/3" {
		t.Fatalf("List(a/) after delete = %v", got)
	}
}

func testInvalidKeys(t *testing.T, s store.Store) {
	for _, k := range []string{"", "/abs", "../up", "a/../b", "a//b", "a/./b", ".pdq/x", "a\\b"} {
		err := s.Put(context.Background(), k, bytes.NewReader(nil), 0, store.PutOptions{})
		if !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
}
