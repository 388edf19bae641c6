// Package s3store is the store.Store of an S3-compatible object store (AWS S3 or a local server),
// built on aws-sdk-go-v2. Credentials, region and endpoint come from the usual AWS chain
// (environment, shared config and credentials files, profiles, SSO, instance roles), overridden by
// Config; AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_S3 are honoured. A custom endpoint switches to
// path-style addressing (http://host/bucket/key), which local servers need.
package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"pdq/publish/store"
)

// Config says where the store is and how to reach it. Empty fields take the AWS defaults.
type Config struct {
	// Bucket and Prefix locate the store's root: key K is the object Prefix/K in Bucket.
	Bucket string
	Prefix string
	// Endpoint is the service URL (e.g. http://127.0.0.1:7070); it overrides AWS_ENDPOINT_URL.
	Endpoint string
	// Region overrides AWS_REGION and the profile's region; us-east-1 when nothing sets one.
	Region string
	// Credentials, when set, replaces the default credential chain.
	Credentials aws.CredentialsProvider
	// MaxConns is how many connections to keep open to the service (default 16); set it to at
	// least the number of requests run in parallel.
	MaxConns int
	// Timeout is the idle timeout of a request: one that sends and receives nothing for this
	// long fails (the SDK tries it up to MaxAttempts times, then the error wraps
	// store.ErrStalled). Zero means DefaultTimeout, a negative value no limit. Time a caller
	// spends between reads of a downloaded range does not count.
	Timeout time.Duration
	// MaxAttempts is how many times a request is tried (default DefaultMaxAttempts).
	MaxAttempts int
}

// DefaultMaxAttempts is how many times a failed request is tried when Config.MaxAttempts is 0.
const DefaultMaxAttempts = 3

// ParseURL splits s3://bucket/prefix into its bucket and prefix (without trailing slash).
func ParseURL(raw string) (bucket, prefix string, err error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "s3" {
		return "", "", fmt.Errorf("s3: %q is not an s3://bucket/prefix URL", raw)
	}
	if u.Host == "" {
		return "", "", fmt.Errorf("s3: %q names no bucket", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", "", fmt.Errorf("s3: %q: query, fragment and user info are not supported", raw)
	}
	prefix = strings.Trim(u.Path, "/")
	if prefix != "" {
		if err := store.ValidKey(prefix); err != nil {
			return "", "", fmt.Errorf("s3: %q: bad prefix: %w", raw, err)
		}
	}
	return u.Host, prefix, nil
}

// Store is the S3 implementation of store.Store.
type Store struct {
	client *s3.Client
	bucket string
	prefix string // "" or ending in "/"
	where  string // endpoint, for messages

	bucketOnce sync.Once
	bucketErr  error // set when the bucket turned out not to exist
}

// Store implements store.Store.
var _ store.Store = (*Store)(nil)

// New returns the store cfg describes. It sends no request to the service. With a custom
// endpoint (Config.Endpoint, AWS_ENDPOINT_URL or AWS_ENDPOINT_URL_S3: a local or non-AWS server)
// the EC2 instance metadata service is never asked for credentials, and missing credentials
// are an error (wrapping store.ErrAuth) here, in one line.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3: no bucket")
	}
	if cfg.Prefix != "" {
		if err := store.ValidKey(cfg.Prefix); err != nil {
			return nil, fmt.Errorf("s3: prefix: %w", err)
		}
	}
	conns := cfg.MaxConns
	if conns <= 0 {
		conns = 16
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	attempts := cfg.MaxAttempts
	if attempts <= 0 {
		attempts = DefaultMaxAttempts
	}
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConnsPerHost = conns
		t.MaxIdleConns = conns
	})
	loaders := []func(*config.LoadOptions) error{
		config.WithHTTPClient(httpClient),
		config.WithRetryMaxAttempts(attempts),
		// The SDK's own lines (a fallback to IMDSv1, retries) go to slog at debug level; what
		// fails reaches the user as a plain error.
		config.WithLogger(sdkLogger{}),
	}
	if cfg.Region != "" {
		loaders = append(loaders, config.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		loaders = append(loaders, config.WithCredentialsProvider(cfg.Credentials))
	}
	nonAWS := cfg.Endpoint != "" || os.Getenv("AWS_ENDPOINT_URL_S3") != "" || os.Getenv("AWS_ENDPOINT_URL") != ""
	if nonAWS {
		// Instance roles belong to AWS: a non-AWS server gets no IMDS probe (and no warning).
		loaders = append(loaders, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, loaders...)
	if err != nil {
		return nil, fmt.Errorf("s3: load AWS configuration: %w", err)
	}
	// The S3 requests go through the same transport (with any AWS_CA_BUNDLE the configuration
	// added), under the idle timeout.
	tr := httpClient.GetTransport()
	if b, ok := awsCfg.HTTPClient.(*awshttp.BuildableClient); ok {
		tr = b.GetTransport()
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	endpoint := cfg.Endpoint
	custom := endpoint != "" || awsCfg.BaseEndpoint != nil || os.Getenv("AWS_ENDPOINT_URL_S3") != ""
	where := "AWS S3"
	switch {
	case endpoint != "":
		where = endpoint
	case os.Getenv("AWS_ENDPOINT_URL_S3") != "":
		where = os.Getenv("AWS_ENDPOINT_URL_S3")
	case awsCfg.BaseEndpoint != nil:
		where = *awsCfg.BaseEndpoint
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.UsePathStyle = custom
		o.HTTPClient = newIdleClient(tr, timeout)
		// We send a CRC32C with every write ourselves and hash every read: no SDK defaults on top.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	if nonAWS && cfg.Credentials == nil {
		if _, err := awsCfg.Credentials.Retrieve(ctx); err != nil {
			return nil, fmt.Errorf("s3: no credentials for %s: %w: none in the environment or the shared config and credentials files; %s", where, store.ErrAuth, credentialsHint)
		}
	}
	p := cfg.Prefix
	if p != "" {
		p += "/"
	}
	return &Store{client: client, bucket: cfg.Bucket, prefix: p, where: where}, nil
}

// String returns the store's s3:// URL.
func (s *Store) String() string { return "s3://" + s.bucket + "/" + strings.TrimSuffix(s.prefix, "/") }

func (s *Store) full(key string) string { return s.prefix + key }
func (s *Store) url(key string) string  { return "s3://" + s.bucket + "/" + s.prefix + key }

// Stat implements store.Store.
func (s *Store) Stat(ctx context.Context, key string) (store.Info, error) {
	if err := store.ValidKey(key); err != nil {
		return store.Info{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(s.full(key))})
	if err != nil {
		err = s.mapErr("stat", key, err)
		if errors.Is(err, store.ErrNotExist) {
			// A HEAD answer has no body to say which is missing, the key or the bucket: ask once.
			if berr := s.checkBucket(ctx); berr != nil {
				return store.Info{}, berr
			}
		}
		return store.Info{}, err
	}
	info := store.Info{Key: key, Size: aws.ToInt64(out.ContentLength), Metadata: map[string]string{}}
	for k, v := range out.Metadata {
		info.Metadata[strings.ToLower(k)] = v
	}
	if out.LastModified != nil {
		info.ModTime = *out.LastModified
	}
	return info, nil
}

func (s *Store) noBucket() error {
	return fmt.Errorf("s3: bucket %s does not exist at %s (create it first): %w", s.bucket, s.where, store.ErrNoBucket)
}

// checkBucket returns the missing-bucket error when the bucket does not exist (or the
// credentials error that hid behind a 404); it asks the service once per store and only after a
// key was not found.
func (s *Store) checkBucket(ctx context.Context) error {
	s.bucketOnce.Do(func() {
		// A listing, unlike a HEAD, answers with an error code: NoSuchBucket, or refused
		// credentials (versitygw answers an unknown key id with a 404 too).
		_, err := s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(s.prefix), MaxKeys: aws.Int32(1)})
		if err == nil {
			return
		}
		if err = s.mapErr("list", "", err); errors.Is(err, store.ErrNoBucket) || errors.Is(err, store.ErrAuth) {
			s.bucketErr = err
		}
	})
	return s.bucketErr
}

// Put implements store.Store.
func (s *Store) Put(ctx context.Context, key string, r io.ReadSeeker, size int64, opts store.PutOptions) error {
	if err := store.ValidKey(key); err != nil {
		return err
	}
	if err := store.ValidMetadata(opts.Metadata); err != nil {
		return err
	}
	in := &s3.PutObjectInput{
		Bucket: &s.bucket, Key: aws.String(s.full(key)),
		Body: r, ContentLength: aws.Int64(size), Metadata: opts.Metadata,
	}
	if opts.HasCRC32C {
		in.ChecksumAlgorithm = "CRC32C"
		in.ChecksumCRC32C = aws.String(encodeCRC(opts.CRC32C))
	}
	if opts.IfNoneMatch {
		in.IfNoneMatch = aws.String("*")
	}
	if _, err := s.client.PutObject(ctx, in); err != nil {
		return s.mapErr("put", key, err)
	}
	return nil
}

// GetRange implements store.Store.
func (s *Store) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := store.ValidKey(key); err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("s3: get %s: negative offset %d", s.url(key), off)
	}
	if length == 0 {
		// An empty range cannot be asked for; say whether the object is there and long enough.
		info, err := s.Stat(ctx, key)
		if err != nil {
			return nil, err
		}
		if off > info.Size {
			return nil, fmt.Errorf("s3: get %s: offset %d outside object of %d bytes", s.url(key), off, info.Size)
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(s.full(key))}
	switch {
	case length > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+length-1))
	case off > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", off))
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		return nil, s.mapErr("get", key, err)
	}
	want := length
	if want < 0 {
		want = aws.ToInt64(out.ContentLength)
	}
	return &exactReader{rc: out.Body, left: want, what: s.url(key)}, nil
}

// exactReader fails with io.ErrUnexpectedEOF when the body ends before the range it asked for.
type exactReader struct {
	rc   io.ReadCloser
	left int64
	what string
}

// Read implements io.Reader.
func (e *exactReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.rc.Read(p)
	e.left -= int64(n)
	if err == io.EOF && e.left > 0 {
		return n, fmt.Errorf("s3: get %s: body ended %d bytes early: %w", e.what, e.left, io.ErrUnexpectedEOF)
	}
	if err == io.EOF {
		err = nil
		if e.left == 0 {
			err = io.EOF
		}
	}
	return n, err
}

// Close implements io.Closer.
func (e *exactReader) Close() error { return e.rc.Close() }

// List implements store.Store.
func (s *Store) List(ctx context.Context, prefix string, fn func(store.Info) error) error {
	pg := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(s.prefix + prefix)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return s.mapErr("list", prefix, err)
		}
		for _, o := range page.Contents {
			info := store.Info{Key: strings.TrimPrefix(aws.ToString(o.Key), s.prefix), Size: aws.ToInt64(o.Size)}
			if o.LastModified != nil {
				info.ModTime = *o.LastModified
			}
			if err := fn(info); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := store.ValidKey(key); err != nil {
		return err
	}
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(s.full(key))}); err != nil {
		if err := s.mapErr("delete", key, err); !errors.Is(err, store.ErrNotExist) {
			return err
		}
	}
	return nil
}
