package s3store

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"pdq/publish/store"
)

// encodeCRC renders a CRC32C as S3 spells it: base64 of the big-endian bytes.
func encodeCRC(c uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], c)
	return base64.StdEncoding.EncodeToString(b[:])
}

// decodeCRC parses an S3 CRC32C; ok is false for an empty or malformed value.
func decodeCRC(s *string) (uint32, bool) {
	if s == nil {
		return 0, false
	}
	b, err := base64.StdEncoding.DecodeString(*s)
	if err != nil || len(b) != 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(b), true
}

// CreateMultipart implements store.Store. Uploads are created with CRC32C checksums, so the
// server checks every part and reports each part's CRC32C in ListParts.
func (s *Store) CreateMultipart(ctx context.Context, key string, opts store.PutOptions) (string, error) {
	if err := store.ValidKey(key); err != nil {
		return "", err
	}
	if err := store.ValidMetadata(opts.Metadata); err != nil {
		return "", err
	}
	out, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: &s.bucket, Key: aws.String(s.full(key)), Metadata: opts.Metadata,
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c,
	})
	if err != nil {
		return "", s.mapErr("create upload", key, err)
	}
	return aws.ToString(out.UploadId), nil
}

// ListUploads implements store.Store.
func (s *Store) ListUploads(ctx context.Context, key string) ([]store.Upload, error) {
	if err := store.ValidKey(key); err != nil {
		return nil, err
	}
	full := s.full(key)
	in := &s3.ListMultipartUploadsInput{Bucket: &s.bucket, Prefix: aws.String(full)}
	var ups []store.Upload
	for {
		out, err := s.client.ListMultipartUploads(ctx, in)
		if err != nil {
			return nil, s.mapErr("list uploads", key, err)
		}
		for _, u := range out.Uploads {
			if aws.ToString(u.Key) != full {
				continue
			}
			up := store.Upload{Key: key, ID: aws.ToString(u.UploadId)}
			if u.Initiated != nil {
				up.Initiated = *u.Initiated
			}
			ups = append(ups, up)
		}
		if !aws.ToBool(out.IsTruncated) || (out.NextKeyMarker == nil && out.NextUploadIdMarker == nil) {
			break
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
	sort.SliceStable(ups, func(i, j int) bool { return ups[i].Initiated.Before(ups[j].Initiated) })
	return ups, nil
}

// UploadPart implements store.Store.
func (s *Store) UploadPart(ctx context.Context, key, uploadID string, num int32, r io.ReadSeeker, size int64, crc32c uint32) (store.Part, error) {
	if err := store.ValidKey(key); err != nil {
		return store.Part{}, err
	}
	out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: &s.bucket, Key: aws.String(s.full(key)), UploadId: aws.String(uploadID),
		PartNumber: aws.Int32(num), Body: r, ContentLength: aws.Int64(size),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c, ChecksumCRC32C: aws.String(encodeCRC(crc32c)),
	})
	if err != nil {
		return store.Part{}, s.mapErr(fmt.Sprintf("upload part %d of", num), key, err)
	}
	return store.Part{Number: num, Size: size, ETag: aws.ToString(out.ETag), CRC32C: crc32c, HasCRC32C: true}, nil
}

// ListParts implements store.Store.
func (s *Store) ListParts(ctx context.Context, key, uploadID string) ([]store.Part, error) {
	if err := store.ValidKey(key); err != nil {
		return nil, err
	}
	in := &s3.ListPartsInput{Bucket: &s.bucket, Key: aws.String(s.full(key)), UploadId: aws.String(uploadID)}
	var parts []store.Part
	for {
		out, err := s.client.ListParts(ctx, in)
		if err != nil {
			return nil, s.mapErr("list parts of", key, err)
		}
		for _, p := range out.Parts {
			crc, ok := decodeCRC(p.ChecksumCRC32C)
			parts = append(parts, store.Part{
				Number: aws.ToInt32(p.PartNumber), Size: aws.ToInt64(p.Size), ETag: aws.ToString(p.ETag),
				CRC32C: crc, HasCRC32C: ok,
			})
		}
		if !aws.ToBool(out.IsTruncated) || out.NextPartNumberMarker == nil {
			break
		}
		in.PartNumberMarker = out.NextPartNumberMarker
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].Number < parts[j].Number })
	return parts, nil
}

// CompleteMultipart implements store.Store.
func (s *Store) CompleteMultipart(ctx context.Context, key, uploadID string, parts []store.Part, opts store.PutOptions) error {
	if err := store.ValidKey(key); err != nil {
		return err
	}
	done := make([]types.CompletedPart, len(parts))
	for i, p := range parts {
		done[i] = types.CompletedPart{PartNumber: aws.Int32(p.Number), ETag: aws.String(p.ETag)}
		if p.HasCRC32C {
			done[i].ChecksumCRC32C = aws.String(encodeCRC(p.CRC32C))
		}
	}
	in := &s3.CompleteMultipartUploadInput{
		Bucket: &s.bucket, Key: aws.String(s.full(key)), UploadId: aws.String(uploadID),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done},
	}
	if opts.IfNoneMatch {
		in.IfNoneMatch = aws.String("*")
	}
	if _, err := s.client.CompleteMultipartUpload(ctx, in); err != nil {
		return s.mapErr("complete upload of", key, err)
	}
	return nil
}

// AbortMultipart implements store.Store.
func (s *Store) AbortMultipart(ctx context.Context, key, uploadID string) error {
	if err := store.ValidKey(key); err != nil {
		return err
	}
	_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: &s.bucket, Key: aws.String(s.full(key)), UploadId: aws.String(uploadID),
	})
	if err != nil {
		return s.mapErr("abort upload of", key, err)
	}
	return nil
}
