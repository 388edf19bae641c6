package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"pdq/publish/store"
)

// partsOf cuts data into parts of MinPartSize and a short last one.
func partsOf(data []byte) [][]byte {
	var out [][]byte
	for len(data) > store.MinPartSize {
		out = append(out, data[:store.MinPartSize])
		data = data[store.MinPartSize:]
	}
	return append(out, data)
}

func uploadPart(t *testing.T, s store.Store, key, id string, num int32, b []byte) store.Part {
	t.Helper()
	p, err := s.UploadPart(context.Background(), key, id, num, bytes.NewReader(b), int64(len(b)), CRC32C(b))
	if err != nil {
		t.Fatalf("UploadPart(%d): %v", num, err)
	}
	return p
}

func testMultipart(t *testing.T, s store.Store) {
	ctx := context.Background()
	data := randBytes(5, 2*store.MinPartSize+12345)
	key := "big/file.bin"
	id, err := s.CreateMultipart(ctx, key, store.PutOptions{Metadata: map[string]string{"sha256": "feed"}})
	if err != nil {
		t.Fatal(err)
	}
	var parts []store.Part
	for i, b := range partsOf(data) {
		parts = append(parts, uploadPart(t, s, key, id, int32(i+1), b))
	}
	wantNotExist(t, s, key) // not visible before completion
	if err := s.CompleteMultipart(ctx, key, id, parts, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	info, err := s.Stat(ctx, key)
	if err != nil || info.Size != int64(len(data)) || info.Metadata["sha256"] != "feed" {
		t.Fatalf("Stat after complete = %+v, %v", info, err)
	}
	if got := get(t, s, key, 0, -1); !bytes.Equal(got, data) {
		t.Fatal("assembled object differs from the parts")
	}
	if ups, err := s.ListUploads(ctx, key); err != nil || len(ups) != 0 {
		t.Fatalf("ListUploads after complete = %v, %v", ups, err)
	}
	// A conditional complete onto an existing key is refused.
	id2, err := s.CreateMultipart(ctx, key, store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := uploadPart(t, s, key, id2, 1, []byte("small"))
	if err := s.CompleteMultipart(ctx, key, id2, []store.Part{p}, store.PutOptions{IfNoneMatch: true}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("conditional CompleteMultipart onto existing key = %v, want ErrExists", err)
	}
	if got := get(t, s, key, 0, -1); !bytes.Equal(got, data) {
		t.Fatal("refused complete changed the object")
	}
	s.AbortMultipart(ctx, key, id2)
}

func testMultipartResume(t *testing.T, s store.Store) {
	ctx := context.Background()
	data := randBytes(6, 2*store.MinPartSize+7)
	chunks := partsOf(data)
	key := "resume.bin"
	id, err := s.CreateMultipart(ctx, key, store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uploadPart(t, s, key, id, 1, chunks[0])
	uploadPart(t, s, key, id, 3, chunks[2])
	ups, err := s.ListUploads(ctx, key)
	if err != nil || len(ups) != 1 || ups[0].ID != id || ups[0].Key != key {
		t.Fatalf("ListUploads = %+v, %v; want the one upload %s", ups, err, id)
	}
	if other, err := s.ListUploads(ctx, "resume"); err != nil || len(other) != 0 {
		t.Fatalf("ListUploads(prefix of key) = %+v, %v; want none", other, err)
	}
	got, err := s.ListParts(ctx, key, id)
	if err != nil || len(got) != 2 {
		t.Fatalf("ListParts = %+v, %v", got, err)
	}
	for i, want := range []struct {
		n int32
		b []byte
	}{{1, chunks[0]}, {3, chunks[2]}} {
		p := got[i]
		if p.Number != want.n || p.Size != int64(len(want.b)) || !p.HasCRC32C || p.CRC32C != CRC32C(want.b) {
			t.Fatalf("ListParts[%d] = %+v, want number %d size %d crc %08x", i, p, want.n, len(want.b), CRC32C(want.b))
		}
	}
	// Replace part 3 with other bytes, then back: the listing follows.
	uploadPart(t, s, key, id, 3, []byte("other bytes"))
	got, _ = s.ListParts(ctx, key, id)
	if len(got) != 2 || got[1].Size != 11 {
		t.Fatalf("after re-upload ListParts = %+v", got)
	}
	parts := []store.Part{got[0], uploadPart(t, s, key, id, 2, chunks[1]), uploadPart(t, s, key, id, 3, chunks[2])}
	if err := s.CompleteMultipart(ctx, key, id, parts, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if b := get(t, s, key, 0, -1); !bytes.Equal(b, data) {
		t.Fatal("resumed object differs")
	}
}

func testMultipartRules(t *testing.T, s store.Store) {
	ctx := context.Background()
	key := "rules.bin"
	id, err := s.CreateMultipart(ctx, key, store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := randBytes(7, 1000)
	if _, err := s.UploadPart(ctx, key, id, 1, bytes.NewReader(b), 1000, CRC32C(b)^1); !errors.Is(err, store.ErrChecksum) {
		t.Fatalf("UploadPart with wrong CRC32C = %v, want ErrChecksum", err)
	}
	p1 := uploadPart(t, s, key, id, 1, b)
	p2 := uploadPart(t, s, key, id, 2, b)
	if err := s.CompleteMultipart(ctx, key, id, []store.Part{p1, p2}, store.PutOptions{}); err == nil {
		t.Fatal("CompleteMultipart with a small non-last part succeeded")
	}
	bad := p1
	bad.ETag = "0123456789abcdef"
	if err := s.CompleteMultipart(ctx, key, id, []store.Part{bad}, store.PutOptions{}); err == nil {
		t.Fatal("CompleteMultipart with a wrong ETag succeeded")
	}
	if _, err := s.ListParts(ctx, key, "00000000000000000000000000000000"); !errors.Is(err, store.ErrNotExist) {
		t.Fatalf("ListParts of an unknown upload = %v, want ErrNotExist", err)
	}
	wantNotExist(t, s, key)
	s.AbortMultipart(ctx, key, id)
}

func testMultipartAbort(t *testing.T, s store.Store) {
	ctx := context.Background()
	key := "abort.bin"
	id, err := s.CreateMultipart(ctx, key, store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uploadPart(t, s, key, id, 1, []byte("abc"))
	if err := s.AbortMultipart(ctx, key, id); err != nil {
		t.Fatal(err)
	}
	if ups, err := s.ListUploads(ctx, key); err != nil || len(ups) != 0 {
		t.Fatalf("ListUploads after abort = %v, %v", ups, err)
	}
	if _, err := s.ListParts(ctx, key, id); !errors.Is(err, store.ErrNotExist) {
		t.Fatalf("ListParts after abort = %v, want ErrNotExist", err)
	}
	wantNotExist(t, s, key)
}
