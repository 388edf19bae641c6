package store

import (
	"context"
	"io"
	"sync"

	"pdq/internal/par"
)

// Limits bound how many requests a store wrapped by Limit runs at once, per kind of request.
// Transfers and bookkeeping have separate slots, so that a Stat or a part listing never waits
// behind a row of large uploads.
type Limits struct {
	// Transfer bounds the requests that move object bytes: Put, UploadPart and GetRange. A
	// GetRange holds its slot until its reader is closed, since the bytes flow while it is read.
	Transfer int
	// Meta bounds every other request: Stat, List (for the whole listing, fn included), Delete,
	// and the multipart bookkeeping (CreateMultipart, ListUploads, ListParts, CompleteMultipart,
	// AbortMultipart).
	Meta int
}

// limited is a Store whose requests wait for a slot of their kind.
type limited struct {
	st             Store
	transfer, meta par.Sem
}

var _ Store = (*limited)(nil)

// Limit returns a store that runs the requests of st with at most l.Transfer transfers and
// l.Meta other requests in flight (each at least 1); callers beyond that wait for a slot, or for
// their context to end. A caller must close every reader GetRange returns, and a List callback
// must not call the same limited store (it would wait for a slot its own listing holds).
func Limit(st Store, l Limits) Store {
	return &limited{st: st, transfer: par.NewSem(l.Transfer), meta: par.NewSem(l.Meta)}
}

// String implements Store.
func (s *limited) String() string { return s.st.String() }

// Stat implements Store.
func (s *limited) Stat(ctx context.Context, key string) (Info, error) {
	if err := s.meta.Acquire(ctx); err != nil {
		return Info{}, err
	}
	defer s.meta.Release()
	return s.st.Stat(ctx, key)
}

// Put implements Store.
func (s *limited) Put(ctx context.Context, key string, r io.ReadSeeker, size int64, opts PutOptions) error {
	if err := s.transfer.Acquire(ctx); err != nil {
		return err
	}
	defer s.transfer.Release()
	return s.st.Put(ctx, key, r, size, opts)
}

// GetRange implements Store; the slot is held until the returned reader is closed.
func (s *limited) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := s.transfer.Acquire(ctx); err != nil {
		return nil, err
	}
	rc, err := s.st.GetRange(ctx, key, off, length)
	if err != nil {
		s.transfer.Release()
		return nil, err
	}
	return &slotReader{ReadCloser: rc, release: s.transfer.Release}, nil
}

// slotReader gives its slot back when closed (once, however often Close is called).
type slotReader struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

// Close implements io.Closer.
func (r *slotReader) Close() error {
	err := r.ReadCloser.Close()
	r.once.Do(r.release)
	return err
}

// List implements Store.
func (s *limited) List(ctx context.Context, prefix string, fn func(Info) error) error {
	if err := s.meta.Acquire(ctx); err != nil {
		return err
	}
	defer s.meta.Release()
	return s.st.List(ctx, prefix, fn)
}

// Delete implements Store.
func (s *limited) Delete(ctx context.Context, key string) error {
	if err := s.meta.Acquire(ctx); err != nil {
		return err
	}
	defer s.meta.Release()
	return s.st.Delete(ctx, key)
}

// CreateMultipart implements Store.
func (s *limited) CreateMultipart(ctx context.Context, key string, opts PutOptions) (string, error) {
	if err := s.meta.Acquire(ctx); err != nil {
		return "", err
	}
	defer s.meta.Release()
	return s.st.CreateMultipart(ctx, key, opts)
}

// ListUploads implements Store.
func (s *limited) ListUploads(ctx context.Context, key string) ([]Upload, error) {
	if err := s.meta.Acquire(ctx); err != nil {
		return nil, err
	}
	defer s.meta.Release()
	return s.st.ListUploads(ctx, key)
}

// UploadPart implements Store.
func (s *limited) UploadPart(ctx context.Context, key, uploadID string, num int32, r io.ReadSeeker, size int64, crc32c uint32) (Part, error) {
	if err := s.transfer.Acquire(ctx); err != nil {
		return Part{}, err
	}
	defer s.transfer.Release()
	return s.st.UploadPart(ctx, key, uploadID, num, r, size, crc32c)
}

// ListParts implements Store.
func (s *limited) ListParts(ctx context.Context, key, uploadID string) ([]Part, error) {
	if err := s.meta.Acquire(ctx); err != nil {
		return nil, err
	}
	defer s.meta.Release()
	return s.st.ListParts(ctx, key, uploadID)
}

// CompleteMultipart implements Store.
func (s *limited) CompleteMultipart(ctx context.Context, key, uploadID string, parts []Part, opts PutOptions) error {
	if err := s.meta.Acquire(ctx); err != nil {
		return err
	}
	defer s.meta.Release()
	return s.st.CompleteMultipart(ctx, key, uploadID, parts, opts)
}

// AbortMultipart implements Store.
func (s *limited) AbortMultipart(ctx context.Context, key, uploadID string) error {
	if err := s.meta.Acquire(ctx); err != nil {
		return err
	}
	defer s.meta.Release()
	return s.st.AbortMultipart(ctx, key, uploadID)
}
