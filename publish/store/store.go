// Package store defines the object store that pdq publishes to and pulls from: the contract and
// Limit, the decorator that bounds requests in flight. The implementations are packages of their
// own: localstore (a directory) and s3store (S3-compatible); the shared test suite every
// implementation must pass lives in package storetest.
//
// A Store is a flat namespace of objects addressed by keys relative to the store's root (a
// directory, or a bucket and prefix). Keys are slash-separated relative paths: no leading slash,
// no empty, "." or ".." segment, no backslash or NUL, and not inside the reserved ".pdq" folder
// (see ValidKey). Every method honours ctx cancellation.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Sentinel errors. Implementations wrap them so that callers can test with errors.Is.
var (
	// ErrNotExist: the object, upload or part does not exist.
	ErrNotExist = errors.New("store: does not exist")
	// ErrNoBucket: the bucket a store lives in does not exist (it is not created for the user).
	ErrNoBucket = errors.New("store: no such bucket")
	// ErrExists: a conditional write (IfNoneMatch) found the key already present.
	ErrExists = errors.New("store: object already exists")
	// ErrChecksum: the bytes received do not match the checksum sent with them.
	ErrChecksum = errors.New("store: checksum mismatch")
	// ErrAuth: the store refused the credentials (missing, unknown or wrong).
	ErrAuth = errors.New("store: credentials refused")
	// ErrInvalidKey: the key is not a valid object key (see ValidKey).
	ErrInvalidKey = errors.New("store: invalid key")
	// ErrInvalidPart: a part list given to CompleteMultipart does not match what was uploaded.
	ErrInvalidPart = errors.New("store: invalid part")
	// ErrStalled: a remote store stopped answering: a request sent and received nothing for
	// longer than the store's idle timeout, every time it was tried.
	ErrStalled = errors.New("store: the server stopped answering")
	// ErrUnreachable: a remote store could not be reached (refused connection, unknown host,
	// network down), every time it was tried.
	ErrUnreachable = errors.New("store: cannot reach the server")
)

// Store is an object store. Contracts every implementation keeps (checked by storetest.Run):
//
//   - Put and UploadPart read r from its current position exactly size bytes; they may rewind r
//     with Seek(0, io.SeekStart) and read it again (for retries or signing), so r must be rewindable
//     and positioned at its start. They fail, leaving nothing visible, if r yields fewer bytes.
//   - An object becomes visible to Stat, GetRange and List only when complete: a failed or
//     cancelled Put or multipart upload never shows a partial object under its key.
//   - Put replaces an existing object unless opts.IfNoneMatch is set; then it fails with ErrExists
//     and leaves the existing object untouched. The check and the write are atomic.
//   - Metadata given to Put or CreateMultipart is returned unchanged by Stat. Metadata keys are
//     lower-case ASCII letters, digits and '-'; values are printable ASCII.
//   - Missing objects, uploads and parts are reported with errors wrapping ErrNotExist.
//   - A CRC32C given with a write is checked against the bytes received; a mismatch fails with
//     ErrChecksum and stores nothing.
//   - Multipart: parts are numbered from 1; uploading a part number again replaces that part;
//     ListParts reports each part's size and CRC32C so a caller can resume an interrupted upload;
//     all parts but the last must be at least MinPartSize bytes; CompleteMultipart assembles the
//     parts given, in order, into one object and ends the upload; an upload not completed stays
//     listed by ListUploads until completed or aborted.
type Store interface {
	// String names the store's location, as a URL, for messages.
	String() string
	// Stat returns the size and metadata of the object at key.
	Stat(ctx context.Context, key string) (Info, error)
	// Put stores size bytes from r under key.
	Put(ctx context.Context, key string, r io.ReadSeeker, size int64, opts PutOptions) error
	// GetRange returns a reader of length bytes of the object at key starting at off; length < 0
	// reads to the end. The reader yields an error if the object ends before the range does.
	GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error)
	// List calls fn for every object whose key starts with prefix, in no particular order.
	List(ctx context.Context, prefix string, fn func(Info) error) error
	// Delete removes the object at key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error

	// CreateMultipart starts a multipart upload to key and returns its id.
	CreateMultipart(ctx context.Context, key string, opts PutOptions) (uploadID string, err error)
	// ListUploads returns the multipart uploads in progress for exactly key, oldest first.
	ListUploads(ctx context.Context, key string) ([]Upload, error)
	// UploadPart stores part number num (1-based) of an upload.
	UploadPart(ctx context.Context, key, uploadID string, num int32, r io.ReadSeeker, size int64, crc32c uint32) (Part, error)
	// ListParts returns the parts uploaded so far, by increasing number.
	ListParts(ctx context.Context, key, uploadID string) ([]Part, error)
	// CompleteMultipart assembles parts into the object at key. With opts.IfNoneMatch it fails
	// with ErrExists if key already holds an object.
	CompleteMultipart(ctx context.Context, key, uploadID string, parts []Part, opts PutOptions) error
	// AbortMultipart discards an upload and its parts.
	AbortMultipart(ctx context.Context, key, uploadID string) error
}

// MinPartSize is the smallest size of every part of a multipart upload but the last (the S3 rule).
const MinPartSize = 5 << 20

// MaxParts is the largest number of parts in one multipart upload (the S3 rule).
const MaxParts = 10000

// Info describes a stored object.
type Info struct {
	Key      string
	Size     int64
	Metadata map[string]string
	ModTime  time.Time
}

// PutOptions qualify a write.
type PutOptions struct {
	// Metadata is stored with the object and returned by Stat.
	Metadata map[string]string
	// IfNoneMatch makes the write fail with ErrExists when the key already holds an object.
	IfNoneMatch bool
	// CRC32C, when HasCRC32C is set, is the Castagnoli CRC of the bytes; the store checks it.
	CRC32C    uint32
	HasCRC32C bool
}

// Upload is a multipart upload in progress.
type Upload struct {
	Key       string
	ID        string
	Initiated time.Time
}

// Part is one uploaded part of a multipart upload.
type Part struct {
	Number int32
	Size   int64
	ETag   string
	// CRC32C is the part's Castagnoli CRC as the store recorded it; HasCRC32C is false when the
	// store did not record one.
	CRC32C    uint32
	HasCRC32C bool
}

// ReservedPrefix is the key folder no object may use; the local store keeps its state there.
const ReservedPrefix = ".pdq"

// ValidKey returns an error wrapping ErrInvalidKey unless key is a clean relative slash path
// outside the reserved folder.
func ValidKey(key string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidKey, key, why) }
	if key == "" {
		return bad("empty")
	}
	if strings.ContainsAny(key, "\\\x00") {
		return bad("contains a backslash or NUL")
	}
	if strings.HasPrefix(key, "/") {
		return bad("absolute")
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return bad("empty path segment")
		case ".", "..":
			return bad("dot segment")
		}
	}
	if key == ReservedPrefix || strings.HasPrefix(key, ReservedPrefix+"/") {
		return bad("inside the reserved " + ReservedPrefix + " folder")
	}
	return nil
}

// ValidMetadata returns an error unless every metadata key and value follows the contract.
func ValidMetadata(md map[string]string) error {
	for k, v := range md {
		if k == "" {
			return errors.New("store: empty metadata key")
		}
		for _, c := range k {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("store: metadata key %q: only a-z, 0-9 and '-'", k)
			}
		}
		for _, c := range v {
			if c < 0x20 || c > 0x7e {
				return fmt.Errorf("store: metadata %q: value must be printable ASCII", k)
			}
		}
	}
	return nil
}
