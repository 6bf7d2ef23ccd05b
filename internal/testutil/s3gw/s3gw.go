// Package s3gw runs a real S3 server for tests: Versity's versitygw (an S3
// gateway over a POSIX directory; ./.ci/deps installs it) on loopback, with
// a bucket made through the AWS SDK. The uploads under test go through the
// real SDK to a real server, not a mock.
package s3gw

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// Credentials of the gateway's root user; tests export them as the SDK's
// environment variables, the chain a real deployment uses for a role.
const (
	AccessKey = "enaprobe-test"
	SecretKey = "enaprobe-test-secret"
	Region    = "us-east-1"
)

// Server is a running gateway.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	Dir      string // the POSIX directory behind it: bucket/key
	Client   *s3.Client
}

// Start runs versitygw on a free loopback port until the test ends, and
// makes bucket. Without versitygw the test skips, or fails under CI=true.
func Start(tb testing.TB, bucket string) *Server {
	return StartIn(tb, bucket, Netns{})
}

// Netns is a network namespace the gateway runs in, for a program under
// test that runs there (serve in a lab's instance namespace): its name,
// a function that runs f inside it, and a dialer into it.
type Netns struct {
	Name string
	Do   func(f func() error) error
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// StartIn is Start inside a network namespace (none: this one).
func StartIn(tb testing.TB, bucket string, ns Netns) *Server {
	tb.Helper()
	bin, err := exec.LookPath("versitygw")
	if err != nil {
		privtest.Unavailable(tb, "versitygw (./.ci/deps installs it)")
	}
	var addr string
	listen := func() error {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addr = ln.Addr().String()
		return ln.Close()
	}
	if ns.Do != nil {
		err = ns.Do(listen)
	} else {
		err = listen()
	}
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	args := []string{"--access", AccessKey, "--secret", SecretKey, "--region", Region, "--port", addr, "--quiet", "posix", dir}
	cmd := exec.Command(bin, args...)
	if ns.Name != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", ns.Name, bin}, args...)...)
	}
	logf, err := os.Create(filepath.Join(tb.TempDir(), "versitygw.log"))
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	s := &Server{Endpoint: "http://" + addr, Dir: dir}
	opts := s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	}
	if ns.Dial != nil {
		opts.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: ns.Dial}}
	}
	s.Client = s3.New(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, err := s.Client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
		if err == nil {
			break
		}
		var op *net.OpError
		if !errors.As(err, &op) || ctx.Err() != nil {
			b, _ := os.ReadFile(logf.Name())
			tb.Fatalf("versitygw on %s: create bucket %s: %v\n%s", addr, bucket, err, b)
		}
		time.Sleep(50 * time.Millisecond) // not listening yet: poll until the deadline
	}
	return s
}

// UseEnv points the SDK's default chain at the gateway's credentials for
// the rest of the test.
func UseEnv(tb testing.TB) {
	tb.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	tb.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	tb.Setenv("AWS_REGION", Region)
	// No shared config of the machine's user, and no IMDS lookups.
	tb.Setenv("AWS_CONFIG_FILE", os.DevNull)
	tb.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	tb.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// Env is UseEnv's variables for a child process.
func Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey, "AWS_REGION=" + Region,
		"AWS_CONFIG_FILE=" + os.DevNull, "AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull, "AWS_EC2_METADATA_DISABLED=true"}
}

// Keys lists the keys of bucket under prefix.
func (s *Server) Keys(tb testing.TB, bucket, prefix string) []string {
	tb.Helper()
	out, err := s.Client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	if err != nil {
		tb.Fatalf("list %s/%s: %v", bucket, prefix, err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}

// Fetch downloads an object into a file of dir named after its key's last
// segment.
func (s *Server) Fetch(tb testing.TB, bucket, key, dir string) string {
	tb.Helper()
	out, err := s.Client.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		tb.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	p := filepath.Join(dir, filepath.Base(key))
	f, err := os.Create(p)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadFrom(out.Body); err != nil {
		tb.Fatal(err)
	}
	return p
}

// ClosedEndpoint is an endpoint nothing listens on, for the failure path.
func ClosedEndpoint(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return fmt.Sprintf("http://127.0.0.1:%s", strconv.Itoa(port))
}
