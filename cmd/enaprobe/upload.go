package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/upload"
)

// uploadFlags say where a bundle goes besides the disk: serve's --upload,
// and `-o s3://...` of trace, analyze and lab run.
type uploadFlags struct {
	endpoint string
	region   string
	cluster  string
	node     string
}

func (u *uploadFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&u.endpoint, "upload-endpoint", "", "an S3-compatible endpoint for s3:// uploads instead of AWS S3, e.g. http://127.0.0.1:7070 (path-style)")
	fs.StringVar(&u.region, "upload-region", "", "AWS region of the upload bucket (default: the SDK's chain: AWS_REGION, the profile, IMDS)")
	fs.StringVar(&u.cluster, "cluster-name", "", "cluster segment of the upload key PREFIX/CLUSTER/NODE/BUNDLE (default: $CLUSTER_NAME, else \"default\")")
	fs.StringVar(&u.node, "node-name", "", "node segment of the upload key (default: $NODE_NAME, which the DaemonSet sets from the downward API, else the host name)")
}

// config is the uploader's configuration for dest (s3://BUCKET/PREFIX).
func (u *uploadFlags) config(dest, instanceType string, log zerolog.Logger) (upload.Config, error) {
	t, err := upload.ParseURL(dest)
	if err != nil {
		return upload.Config{}, usageError{err}
	}
	host, _ := os.Hostname()
	cluster := cmp.Or(u.cluster, os.Getenv("CLUSTER_NAME"), "default")
	node := cmp.Or(u.node, os.Getenv("NODE_NAME"), host)
	meta := map[string]string{"cluster": cluster, "node": node, "hostname": host}
	if instanceType != "" {
		meta["instance-type"] = instanceType
	}
	return upload.Config{Target: t, Endpoint: u.endpoint, Region: u.region, Cluster: cluster, Node: node,
		Metadata: meta, Log: log}, nil
}

// oneOffBackoff is how a trace's `-o s3://` retries: about a minute, then
// the bundle stays in the temporary directory and the trace says where.
var oneOffBackoff = upload.Backoff{Initial: time.Second, Max: 16 * time.Second, Attempts: 5}

// uploadBundle writes the bundle to the temporary directory and uploads it
// to dest, removing the local copy once it is in the bucket. A bundle that
// could not be uploaded stays, and the error names it.
func uploadBundle(ctx context.Context, dest string, uf uploadFlags, write func(path string) error, rec *record.Recording, log zerolog.Logger) error {
	cfg, err := uf.config(dest, rec.Meta.InstanceType, log)
	if err != nil {
		return err
	}
	cfg.Backoff = oneOffBackoff
	iface := ""
	if len(rec.Meta.Interfaces) == 1 {
		iface = "-" + rec.Meta.Interfaces[0].Name
	}
	local := filepath.Join(os.TempDir(), "enaprobe-"+time.Now().UTC().Format("20060102T150405.000Z")+iface+".tar.gz")
	if err := write(local); err != nil {
		return err
	}
	u, err := upload.New(ctx, cfg)
	if err != nil {
		return fmt.Errorf("%w (the bundle is in %s)", err, local)
	}
	if err := u.Upload(ctx, local); err != nil {
		return fmt.Errorf("%w (the bundle is in %s)", err, local)
	}
	log.Info().Str("bundle", u.URL(local)).Msg("bundle uploaded")
	return os.Remove(local)
}

// isUpload tells an -o that names a bucket.
func isUpload(output string) bool { return strings.HasPrefix(output, upload.Scheme) }
