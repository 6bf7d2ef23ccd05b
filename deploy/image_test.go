package deploy

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// TestImage builds the image twice, each from its own `make release`, as
// `make image` does (buildah, daemonless): the same commit gives the same
// digest, the index holds linux/amd64 and linux/arm64, and each image is
// labelled with the version and revision and runs /enaprobe.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two releases and two images")
	}
	privtest.RequireRoot(t, "buildah", "make")
	var digests []string
	var archive string
	for i := range 2 {
		dist := t.TempDir()
		if out, err := exec.Command("make", "-C", "..", "release", "DIST="+dist).CombinedOutput(); err != nil {
			t.Fatalf("make release: %v\n%s", err, out)
		}
		name := "localhost/enaprobe-imagetest:" + string(rune('a'+i))
		cmd := exec.Command("../scripts/image")
		cmd.Env = append(os.Environ(), "DIST="+dist, "IMAGE_NAME="+name)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("scripts/image: %v\n%s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("buildah", "manifest", "rm", name).Run() })
		d, err := os.ReadFile(filepath.Join(dist, "enaprobe-image.digest"))
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, strings.TrimSpace(string(d)))
		archive = filepath.Join(dist, "enaprobe-image.tar")
	}
	if digests[0] != digests[1] || !strings.HasPrefix(digests[0], "sha256:") {
		t.Errorf("two builds of one commit: digests %v, want one", digests)
	}
	t.Logf("image index %s", digests[0])

	blobs := readArchive(t, archive)
	var layout struct {
		Manifests []struct{ Digest string } `json:"manifests"`
	}
	decode(t, blobs["index.json"], &layout)
	if len(layout.Manifests) != 1 || layout.Manifests[0].Digest != digests[0] {
		t.Fatalf("index.json %+v, want the one index %s", layout, digests[0])
	}
	var index struct {
		Manifests []struct {
			Digest   string
			Platform struct{ Architecture, OS string }
		} `json:"manifests"`
	}
	decode(t, blob(t, blobs, digests[0]), &index)
	var arches []string
	for _, m := range index.Manifests {
		arches = append(arches, m.Platform.OS+"/"+m.Platform.Architecture)
		var manifest struct{ Config struct{ Digest string } }
		decode(t, blob(t, blobs, m.Digest), &manifest)
		var config struct {
			Architecture string
			Config       struct {
				Labels     map[string]string
				Entrypoint []string
			}
		}
		decode(t, blob(t, blobs, manifest.Config.Digest), &config)
		l := config.Config.Labels
		if l["org.opencontainers.image.version"] == "" || l["org.opencontainers.image.revision"] == "" {
			t.Errorf("%s: labels %v, want the version and revision", m.Platform.Architecture, l)
		}
		if !slices.Equal(config.Config.Entrypoint, []string{"/enaprobe"}) || config.Architecture != m.Platform.Architecture {
			t.Errorf("%s: entrypoint %v, architecture %s", m.Platform.Architecture, config.Config.Entrypoint, config.Architecture)
		}
	}
	slices.Sort(arches)
	if !slices.Equal(arches, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("platforms %v, want linux/amd64 and linux/arm64", arches)
	}
}

func readArchive(t *testing.T, p string) map[string][]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(h.Name, "./")] = b
	}
}

func blob(t *testing.T, blobs map[string][]byte, digest string) []byte {
	t.Helper()
	b, ok := blobs["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
	if !ok {
		t.Fatalf("blob %s missing from the archive", digest)
	}
	return b
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}
