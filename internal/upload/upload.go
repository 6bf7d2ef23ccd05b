// Package upload ships bundles to S3 (or an S3-compatible store) with the
// AWS SDK for Go v2: credentials from the SDK's default chain (an instance
// role, IRSA, EKS Pod Identity, the environment), keys that name the
// cluster and the node, retries with backoff, and a queue that never blocks
// its caller. A bundle stays on disk until it is uploaded (Pending), so the
// bundle budget never removes evidence that exists nowhere else.
package upload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/rs/zerolog"
)

// Scheme starts an upload destination: s3://BUCKET/PREFIX.
const Scheme = "s3://"

// IsURL tells an upload destination from a local path.
func IsURL(s string) bool { return strings.HasPrefix(s, Scheme) }

// Target is a bucket and the prefix keys go under.
type Target struct {
	Bucket string
	Prefix string // without leading or trailing slash; may be empty
}

// ParseURL reads s3://BUCKET[/PREFIX].
func ParseURL(s string) (Target, error) {
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		return Target{}, fmt.Errorf("upload destination %q: want s3://BUCKET/PREFIX", s)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return Target{}, fmt.Errorf("upload destination %q has no bucket: want s3://BUCKET/PREFIX", s)
	}
	return Target{Bucket: bucket, Prefix: strings.Trim(prefix, "/")}, nil
}

func (t Target) String() string { return Scheme + path.Join(t.Bucket, t.Prefix) }

// Key is the object key of a bundle file: PREFIX/CLUSTER/NODE/NAME, so that
// one bucket holds a fleet and a node's bundles list together.
func (t Target) Key(cluster, node, name string) string {
	return path.Join(t.Prefix, safeSegment(cluster), safeSegment(node), name)
}

// safeSegment keeps a key segment one segment: a slash in a cluster or node
// name would nest it.
func safeSegment(s string) string {
	s = strings.ReplaceAll(s, "/", "_")
	if s == "" || s == "." || s == ".." {
		return "unknown"
	}
	return s
}

// Backoff is how uploads are retried: Initial, doubling up to Max, at most
// Attempts tries in all (0: until the context ends).
type Backoff struct {
	Initial  time.Duration
	Max      time.Duration
	Attempts int
}

// DefaultBackoff is serve's: an S3 outage of an hour is ridden out; a
// bundle waits on disk meanwhile.
var DefaultBackoff = Backoff{Initial: time.Second, Max: 5 * time.Minute}

func (b Backoff) delay(attempt int) time.Duration {
	d := b.Initial
	for range attempt {
		d *= 2
		if d >= b.Max {
			return b.Max
		}
	}
	return d
}

// Result is the outcome of one attempt, for metrics.
type Result string

const (
	Uploaded Result = "uploaded" // the object is in the bucket
	Retried  Result = "retried"  // an attempt failed and will be tried again
	Failed   Result = "failed"   // given up: out of attempts, or a permanent error
	Skipped  Result = "skipped"  // already in the bucket with the same size
)

// Results are every Result, for metrics that list them from the start.
var Results = []Result{Uploaded, Skipped, Retried, Failed}

// Config says where and how to upload.
type Config struct {
	Target   Target
	Endpoint string // an S3-compatible endpoint (path-style); "" for AWS S3
	Region   string // "" for the SDK's chain (AWS_REGION, the profile, IMDS)
	Cluster  string // key segment
	Node     string // key segment
	// Metadata goes with each object (x-amz-meta-*): instance id and type.
	Metadata map[string]string
	Backoff  Backoff
	// Queue bounds the bundles waiting; more are left on disk, counted as
	// failed (0: 64).
	Queue int
	// OnResult is called after every attempt (metrics).
	OnResult func(Result)
	Log      zerolog.Logger
}

// Uploader uploads bundle files.
type Uploader struct {
	cfg    Config
	client *s3.Client
	queue  chan string

	mu      sync.Mutex
	pending map[string]bool
	lastErr error
	lastAt  time.Time
}

// New makes an uploader; credentials and region come from the SDK's default
// chain, so nothing here is a secret.
func New(ctx context.Context, cfg Config) (*Uploader, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("upload to %s: aws configuration: %w", cfg.Target, err)
	}
	if ac.Region == "" {
		if cfg.Endpoint == "" {
			return nil, fmt.Errorf("upload to %s: no AWS region: set AWS_REGION or --upload-region", cfg.Target)
		}
		ac.Region = "us-east-1" // S3-compatible stores take any
	}
	// The SDK's own retries are brief; ours wait minutes, with the bundle on disk.
	ac.RetryMaxAttempts = 1
	client := s3.NewFromConfig(ac, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
			o.UsePathStyle = true
		}
	})
	if cfg.Backoff == (Backoff{}) {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 64
	}
	if cfg.OnResult == nil {
		cfg.OnResult = func(Result) {}
	}
	return &Uploader{cfg: cfg, client: client, queue: make(chan string, cfg.Queue), pending: map[string]bool{}}, nil
}

// Key is the object key a bundle file is uploaded to.
func (u *Uploader) Key(file string) string {
	return u.cfg.Target.Key(u.cfg.Cluster, u.cfg.Node, filepath.Base(file))
}

// URL is where a bundle file is uploaded to, for logs and messages.
func (u *Uploader) URL(file string) string { return Scheme + u.cfg.Target.Bucket + "/" + u.Key(file) }

// Enqueue queues a bundle file for Run without blocking: with the queue
// full the bundle stays on disk, not pending (the budget may remove it),
// and counts as failed.
func (u *Uploader) Enqueue(file string) {
	u.mu.Lock()
	if u.pending[file] {
		u.mu.Unlock()
		return
	}
	u.pending[file] = true
	u.mu.Unlock()
	select {
	case u.queue <- file:
	default:
		u.done(file, fmt.Errorf("upload %s: %d bundles already wait", file, u.cfg.Queue))
		u.cfg.OnResult(Failed)
	}
}

// Pending tells whether a bundle file waits for its upload: the budget
// keeps it.
func (u *Uploader) Pending(file string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.pending[file]
}

// LastError is when the last failed attempt was and its error, nil when
// the last attempt succeeded or none was made.
func (u *Uploader) LastError() (time.Time, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.lastAt, u.lastErr
}

// Run uploads what Enqueue queues until ctx ends, calling uploaded with
// each file it put in the bucket (serve applies its budget then).
func (u *Uploader) Run(ctx context.Context, uploaded func(file string)) {
	for {
		select {
		case <-ctx.Done():
			return
		case file := <-u.queue:
			err := u.Upload(ctx, file)
			u.done(file, err)
			if err == nil && uploaded != nil {
				uploaded(file)
			}
		}
	}
}

func (u *Uploader) done(file string, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.pending, file)
	u.lastErr, u.lastAt = err, time.Now()
}

// Upload puts one bundle file in the bucket, retrying with backoff, and
// skips it when the bucket holds it already (a restarted serve queues what
// its directory holds).
func (u *Uploader) Upload(ctx context.Context, file string) error {
	key := u.Key(file)
	for attempt := 0; ; attempt++ {
		res, err := u.attempt(ctx, file, key)
		if err == nil {
			u.cfg.OnResult(res)
			if res == Uploaded {
				u.cfg.Log.Info().Str("bundle", file).Str("object", u.URL(file)).Msg("bundle uploaded")
			}
			return nil
		}
		u.mu.Lock()
		u.lastErr, u.lastAt = err, time.Now()
		u.mu.Unlock()
		last := u.cfg.Backoff.Attempts > 0 && attempt+1 >= u.cfg.Backoff.Attempts
		if permanent(err) || last || ctx.Err() != nil {
			u.cfg.OnResult(Failed)
			u.cfg.Log.Warn().Err(err).Str("bundle", file).Int("attempts", attempt+1).Msg("bundle not uploaded: it stays on disk")
			return err
		}
		u.cfg.OnResult(Retried)
		wait := u.cfg.Backoff.delay(attempt)
		u.cfg.Log.Warn().Err(err).Str("bundle", file).Str("retry_in", wait.String()).Msg("bundle upload failed; retrying")
		select {
		case <-ctx.Done():
			u.cfg.OnResult(Failed)
			return fmt.Errorf("%w (then stopped: %v)", err, ctx.Err())
		case <-time.After(wait):
		}
	}
}

func (u *Uploader) attempt(ctx context.Context, file, key string) (Result, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("upload %s: %w", file, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("upload %s: %w", file, err)
	}
	head, err := u.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &u.cfg.Target.Bucket, Key: &key})
	if err == nil && head.ContentLength != nil && *head.ContentLength == st.Size() {
		return Skipped, nil
	}
	_, err = u.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        &u.cfg.Target.Bucket,
		Key:           &key,
		Body:          f,
		ContentLength: aws.Int64(st.Size()),
		ContentType:   aws.String("application/gzip"),
		Metadata:      u.cfg.Metadata,
	})
	if err != nil {
		return "", fmt.Errorf("upload %s to %s: %w", file, Scheme+u.cfg.Target.Bucket+"/"+key, err)
	}
	return Uploaded, nil
}

// permanent tells errors no retry mends: the bucket does not exist, or
// access is denied (the IAM policy wants s3:PutObject on the prefix).
func permanent(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchBucket", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled":
			return true
		}
	}
	return errors.Is(err, os.ErrNotExist)
}
