package owner

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/enaprobe/enaprobe/internal/record"
)

const (
	cid  = "3f4c1e0d9b2a8c7e6f5d4c3b2a1908f7e6d5c4b3a2918f7e6d5c4b3a29180f7e"
	uid  = "8a1c5b2e-4f3d-4e6a-9b7c-0d1e2f3a4b5c"
	uidU = "8a1c5b2e_4f3d_4e6a_9b7c_0d1e2f3a4b5c"
)

// TestDescribe reads paths as systemd, Docker, containerd, CRI-O, Podman
// and the kubelet (systemd and cgroupfs drivers) write them.
func TestDescribe(t *testing.T) {
	cases := []struct {
		path string
		want record.Owner
	}{
		{"/system.slice/nginx.service", record.Owner{Unit: "nginx.service"}},
		{"/user.slice/user-1000.slice/session-4.scope", record.Owner{Unit: "session-4.scope"}},
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-firefox-2290.scope",
			record.Owner{Unit: "app-gnome-firefox-2290.scope"}},
		{"/system.slice/docker-" + cid + ".scope", record.Owner{Unit: "docker-" + cid + ".scope", Container: cid}},
		{"/docker/" + cid, record.Owner{Container: cid}},
		{"/system.slice/docker.service", record.Owner{Unit: "docker.service"}},
		{"/machine.slice/libpod-" + cid + ".scope/container", record.Owner{Unit: "libpod-" + cid + ".scope", Container: cid}},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/cri-containerd-" + cid + ".scope",
			record.Owner{Unit: "cri-containerd-" + cid + ".scope", Container: cid, Pod: uid}},
		{"/kubepods.slice/kubepods-pod" + uidU + ".slice/crio-" + cid + ".scope",
			record.Owner{Unit: "crio-" + cid + ".scope", Container: cid, Pod: uid}},
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uidU + ".slice/crio-conmon-" + cid + ".scope",
			record.Owner{Unit: "crio-conmon-" + cid + ".scope", Pod: uid}},
		{"/kubepods/burstable/pod" + uid + "/" + cid, record.Owner{Container: cid, Pod: uid}},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice",
			record.Owner{Pod: uid}},
		{"/kubepods.slice/kubepods-burstable.slice", record.Owner{}},
		{"/", record.Owner{}},
		{"/enaprobe-test/dns", record.Owner{}},
		{"/system.slice/docker-notanid.scope", record.Owner{Unit: "docker-notanid.scope"}},
		{"/pods/" + cid, record.Owner{}}, // a bare id only where the runtimes put one
	}
	for _, c := range cases {
		c.want.Cgroup = c.path
		if got := Describe(c.path); got != c.want {
			t.Errorf("Describe(%q)\n got %+v\nwant %+v", c.path, got, c.want)
		}
	}
}

func TestPodName(t *testing.T) {
	dir := t.TempDir()
	d := PodDirs{Logs: filepath.Join(dir, "logs"), Kubelet: filepath.Join(dir, "kubelet")}
	if got := d.PodName(uid); got != "" {
		t.Errorf("no directories: %q, want empty", got)
	}
	hosts := "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::1\tip6-allnodes\n10.244.1.5\tcoredns-5d78c9869d-x7k2p\n"
	mustWrite(t, filepath.Join(d.Kubelet, "pods", uid, "etc-hosts"), hosts)
	if got := d.PodName(uid); got != "coredns-5d78c9869d-x7k2p" {
		t.Errorf("from etc-hosts: %q, want the hostname", got)
	}
	mustWrite(t, filepath.Join(d.Logs, "kube-system_coredns-5d78c9869d-x7k2p_"+uid, "coredns", "0.log"), "")
	mustWrite(t, filepath.Join(d.Logs, "default_other_00000000-0000-0000-0000-000000000000", "x", "0.log"), "")
	if got := d.PodName(uid); got != "kube-system/coredns-5d78c9869d-x7k2p" {
		t.Errorf("from the log directory: %q, want kube-system/coredns-5d78c9869d-x7k2p", got)
	}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
