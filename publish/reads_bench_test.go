package publish

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"pdq/publish/store/localstore"
	"pdq/publish/store/s3store"
	"pdq/publish/store/s3store/s3test"
)

// readBytes returns how many bytes this process has read through system calls (rchar of
// /proc/self/io: files, including those in the page cache, and sockets).
func readBytes(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Skip("no /proc/self/io:", err)
	}
	for l := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Skip("no rchar in /proc/self/io")
	return 0
}

// benchFiles writes files of size bytes (incompressible) into a new directory.
func benchFiles(b *testing.B, files int, size int64) (string, int64) {
	dir := b.TempDir()
	r := rand.NewChaCha8([32]byte{1})
	buf := make([]byte, size)
	for i := range files {
		r.Read(buf)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("model-%05d.safetensors", i)), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir, int64(files) * size
}

// BenchmarkPublishReads publishes 4 files of 64 MiB, 16 MiB parts, 4 requests in flight, to a
// fresh version each iteration, and reports the bytes this process read per byte published
// (read-B/B: each file once, hashed in memory while sent, and on the local store the store's
// own assembly of the parts; the S3 SDK signs each part from memory). local-recorded publishes
// files whose sums a sums record holds. hash-only is a hash pass alone, what a publish that
// hashed every file before sending it read besides. s3-copy is what a staging design would
// have added instead: a server-side CopyObject of every byte (versitygw copies through its own
// read and write).
func BenchmarkPublishReads(b *testing.B) {
	const files, size, part = 4, 64 << 20, 16 << 20
	dir, total := benchFiles(b, files, size)
	opts := Options{ToolVersion: "bench", PartSize: part, Parallel: 4, Log: discardLog}
	report := func(b *testing.B, read0 int64) {
		b.SetBytes(total)
		b.ReportMetric(float64(readBytes(b)-read0)/float64(total)/float64(b.N), "read-B/B")
	}
	b.Run("hash-only", func(b *testing.B) {
		fs, err := listFiles(dir, "")
		if err != nil {
			b.Fatal(err)
		}
		read0 := readBytes(b)
		for b.Loop() {
			err := forEach(context.Background(), len(fs), opts.Parallel, func(ctx context.Context, i int) error {
				_, err := hashFile(ctx, fs[i].local, part, nil)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		report(b, read0)
	})
	b.Run("local", func(b *testing.B) {
		root := b.TempDir()
		i := 0
		read0 := readBytes(b)
		for b.Loop() {
			i++
			st, err := localstore.New(filepath.Join(root, strconv.Itoa(i)))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Publish(context.Background(), st, dir, opts); err != nil {
				b.Fatal(err)
			}
		}
		report(b, read0)
	})
	b.Run("local-recorded", func(b *testing.B) {
		root := b.TempDir()
		o := opts
		o.SumsRecord = filepath.Join(root, "sums.json")
		i := 0
		publish := func() {
			i++
			st, err := localstore.New(filepath.Join(root, strconv.Itoa(i)))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Publish(context.Background(), st, dir, o); err != nil {
				b.Fatal(err)
			}
		}
		publish() // records the sums
		read0 := readBytes(b)
		for b.Loop() {
			publish()
		}
		report(b, read0)
	})
	srv := s3test.Start(b)
	bucket := srv.NewBucket(b)
	version := 0 // every iteration of every run publishes a new version
	b.Run("s3", func(b *testing.B) {
		read0 := readBytes(b)
		for b.Loop() {
			version++
			st, err := s3store.New(context.Background(), srv.Config(bucket, "v"+strconv.Itoa(version)))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Publish(context.Background(), st, dir, opts); err != nil {
				b.Fatal(err)
			}
		}
		report(b, read0)
	})
	b.Run("s3-copy", func(b *testing.B) {
		client := s3.New(s3.Options{
			BaseEndpoint: aws.String(srv.Endpoint), Region: s3test.Region, UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(s3test.AccessKey, s3test.SecretKey, ""),
		})
		ctx := context.Background()
		body := make([]byte, size)
		for f := range files {
			_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(fmt.Sprintf("src/%d", f)),
				Body: bytes.NewReader(body), ContentLength: aws.Int64(size)})
			if err != nil {
				b.Fatal(err)
			}
		}
		for b.Loop() {
			version++
			err := forEach(ctx, files, opts.Parallel, func(ctx context.Context, f int) error {
				_, err := client.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &bucket,
					CopySource: aws.String(fmt.Sprintf("%s/src/%d", bucket, f)), Key: aws.String(fmt.Sprintf("dst/%d/%d", version, f)),
					MetadataDirective: "REPLACE", Metadata: map[string]string{metaSHA256: "x"}})
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(total)
	})
}
