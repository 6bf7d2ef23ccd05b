package upload

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/testutil/s3gw"
)

func TestParseURL(t *testing.T) {
	for in, want := range map[string]Target{
		"s3://b":             {Bucket: "b"},
		"s3://b/":            {Bucket: "b"},
		"s3://b/p/q/":        {Bucket: "b", Prefix: "p/q"},
		"s3://my-bucket/x/y": {Bucket: "my-bucket", Prefix: "x/y"},
	} {
		got, err := ParseURL(in)
		if err != nil || got != want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"s3://", "s3:///p", "/var/lib/enaprobe", "https://b/p"} {
		if _, err := ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q): no error", bad)
		}
	}
	if k := (Target{Bucket: "b", Prefix: "p"}).Key("prod/eu", "", "enaprobe-x.tar.gz"); k != "p/prod_eu/unknown/enaprobe-x.tar.gz" {
		t.Errorf("key %q", k)
	}
}

// results collects what OnResult reports.
type results struct {
	mu  sync.Mutex
	got []Result
}

func (r *results) add(x Result) { r.mu.Lock(); r.got = append(r.got, x); r.mu.Unlock() }
func (r *results) list() []Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func bundleFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUploadToS3: through the real SDK to a real S3 server, credentials
// from the SDK's default chain (the environment here): the object lands
// under PREFIX/CLUSTER/NODE with its metadata, and a second upload of the
// same bundle is skipped.
func TestUploadToS3(t *testing.T) {
	gw := s3gw.Start(t, "bundles")
	s3gw.UseEnv(t)
	var res results
	u, err := New(context.Background(), Config{
		Target: Target{Bucket: "bundles", Prefix: "enaprobe"}, Endpoint: gw.Endpoint,
		Cluster: "prod", Node: "ip-10-0-0-1", Metadata: map[string]string{"instance-id": "i-0123"},
		OnResult: res.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("bundle"), 10000)
	file := bundleFile(t, "enaprobe-20261201T000000.000Z-eth0-microburst_out.tar.gz", data)
	if err := u.Upload(context.Background(), file); err != nil {
		t.Fatal(err)
	}
	key := "enaprobe/prod/ip-10-0-0-1/" + filepath.Base(file)
	if keys := gw.Keys(t, "bundles", "enaprobe/"); !slices.Equal(keys, []string{key}) {
		t.Fatalf("keys %v, want [%s]", keys, key)
	}
	got, err := os.ReadFile(gw.Fetch(t, "bundles", key, t.TempDir()))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("fetched %d bytes (%v), want the %d uploaded", len(got), err, len(data))
	}
	if err := u.Upload(context.Background(), file); err != nil {
		t.Fatal(err)
	}
	if r := res.list(); !slices.Equal(r, []Result{Uploaded, Skipped}) {
		t.Errorf("results %v, want uploaded then skipped", r)
	}
	if _, err := u.LastError(); err != nil {
		t.Errorf("last error %v after uploads that worked", err)
	}
}

// TestUploadUnreachable: an endpoint nothing listens on is retried with
// backoff, each attempt counted, the error kept, and the bundle stays.
func TestUploadUnreachable(t *testing.T) {
	s3gw.UseEnv(t)
	var res results
	u, err := New(context.Background(), Config{
		Target: Target{Bucket: "bundles"}, Endpoint: s3gw.ClosedEndpoint(t), Cluster: "c", Node: "n",
		Backoff: Backoff{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond, Attempts: 3}, OnResult: res.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	file := bundleFile(t, "enaprobe-x.tar.gz", []byte("x"))
	if err := u.Upload(context.Background(), file); err == nil {
		t.Fatal("upload to a closed port succeeded")
	}
	if r := res.list(); !slices.Equal(r, []Result{Retried, Retried, Failed}) {
		t.Errorf("results %v, want two retries then failed", r)
	}
	if at, err := u.LastError(); err == nil || at.IsZero() {
		t.Errorf("last error %v at %v, want the failure", err, at)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("the bundle is gone after a failed upload: %v", err)
	}
}

// TestQueue: a queued bundle is pending until Run has uploaded it, and Run
// says so; Enqueue never blocks, a full queue leaves the bundle on disk
// and counts it failed.
func TestQueue(t *testing.T) {
	gw := s3gw.Start(t, "queue")
	s3gw.UseEnv(t)
	var res results
	u, err := New(context.Background(), Config{Target: Target{Bucket: "queue"}, Endpoint: gw.Endpoint, Cluster: "c", Node: "n", Queue: 1, OnResult: res.add})
	if err != nil {
		t.Fatal(err)
	}
	a, b := bundleFile(t, "enaprobe-a.tar.gz", []byte("a")), bundleFile(t, "enaprobe-b.tar.gz", []byte("b"))
	u.Enqueue(a)
	u.Enqueue(b) // the queue holds one: b stays on disk
	if !u.Pending(a) || u.Pending(b) {
		t.Fatalf("pending a %v b %v, want a only", u.Pending(a), u.Pending(b))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	uploaded := make(chan string, 2)
	go u.Run(ctx, func(f string) { uploaded <- f })
	select {
	case f := <-uploaded:
		if f != a {
			t.Errorf("uploaded %s, want %s", f, a)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the queued bundle was not uploaded within 30 s")
	}
	if u.Pending(a) {
		t.Error("a still pending after its upload")
	}
	if r := res.list(); !slices.Equal(r, []Result{Failed, Uploaded}) {
		t.Errorf("results %v, want failed (b: queue full) then uploaded", r)
	}
	if keys := gw.Keys(t, "queue", ""); !slices.Equal(keys, []string{"c/n/enaprobe-a.tar.gz"}) {
		t.Errorf("keys %v", keys)
	}
}
