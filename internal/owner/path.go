package owner

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/enaprobe/enaprobe/internal/record"
)

// Describe reads what a cgroup v2 path says about its processes: the
// systemd unit (its last .service or .scope element), the container id
// (Docker, containerd, CRI-O, Podman, under systemd or cgroupfs drivers)
// and, under Kubernetes, the pod UID (PodUID). Cgroup is the path itself.
func Describe(path string) record.Owner {
	o := record.Owner{Cgroup: path}
	elems := strings.Split(strings.Trim(path, "/"), "/")
	for i, e := range elems {
		if strings.HasSuffix(e, ".service") || strings.HasSuffix(e, ".scope") {
			o.Unit = e
		}
		if id := containerID(e, i > 0 && (elems[i-1] == "docker" || podUID(elems[i-1]) != "")); id != "" {
			o.Container = id
		}
		if uid := podUID(e); uid != "" {
			o.Pod = uid
		}
	}
	return o
}

// containerPrefixes are how runtimes name a container's systemd scope:
// docker-<id>.scope (Docker), cri-containerd-<id>.scope (containerd's CRI
// plugin), crio-<id>.scope (CRI-O; crio-conmon-<id>.scope is its monitor,
// not the container), libpod-<id>.scope (Podman).
var containerPrefixes = []string{"docker-", "cri-containerd-", "crio-", "libpod-", "containerd-"}

// containerID is the container id an element names, or "". bare says the
// element sits where cgroupfs drivers put a bare id (/docker/<id>,
// /kubepods/burstable/pod<uid>/<id>).
func containerID(e string, bare bool) string {
	if name, ok := strings.CutSuffix(e, ".scope"); ok {
		for _, p := range containerPrefixes {
			if id, ok := strings.CutPrefix(name, p); ok && isContainerID(id) {
				return id
			}
		}
		return ""
	}
	if bare && isContainerID(e) {
		return e
	}
	return ""
}

// isContainerID accepts the 64 hex digits every runtime here uses.
func isContainerID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// podUID is the pod UID a kubepods element names, or "": the systemd
// driver writes kubepods-<qos>-pod<uid>.slice with the UID's dashes as
// underscores, cgroupfs pod<uid>.
func podUID(e string) string {
	if !isPodElem(e) {
		return ""
	}
	e = strings.TrimSuffix(e, ".slice")
	uid := e[strings.LastIndex(e, "pod")+3:]
	uid = strings.ReplaceAll(uid, "_", "-")
	if !isUID(uid) {
		return ""
	}
	return uid
}

func isPodElem(e string) bool {
	return strings.HasPrefix(e, "pod") || (strings.HasPrefix(e, "kubepods") && strings.Contains(e, "-pod"))
}

// isUID accepts a UUID: 8-4-4-4-12 hex digits.
func isUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// PodDirs are where the kubelet keeps what names a pod.
type PodDirs struct {
	// Logs holds a directory per pod, <namespace>_<name>_<uid>: the CRI
	// log layout every kubelet writes (default /var/log/pods).
	Logs string
	// Kubelet holds pods/<uid>/etc-hosts, whose entry for the pod's own
	// address is its hostname, the pod name unless the spec overrides it
	// (default /var/lib/kubelet).
	Kubelet string
}

// DefaultPodDirs are the kubelet's defaults.
var DefaultPodDirs = PodDirs{Logs: "/var/log/pods", Kubelet: "/var/lib/kubelet"}

// PodName is namespace/name of the pod with this UID, or the name alone
// when only etc-hosts tells it, or "" when neither does.
func (d PodDirs) PodName(uid string) string {
	if d.Logs != "" {
		if m, _ := filepath.Glob(filepath.Join(d.Logs, "*_*_"+uid)); len(m) == 1 {
			ns, rest, ok := strings.Cut(filepath.Base(m[0]), "_")
			if name, ok2 := strings.CutSuffix(rest, "_"+uid); ok && ok2 {
				return ns + "/" + name
			}
		}
	}
	if d.Kubelet != "" {
		b, err := os.ReadFile(filepath.Join(d.Kubelet, "pods", uid, "etc-hosts"))
		if err == nil {
			return hostsName(string(b))
		}
	}
	return ""
}

// hostsName is the hostname of the kubelet's etc-hosts: the last line
// that is no comment and no localhost or ip6 entry.
func hostsName(hosts string) string {
	name := ""
	for _, l := range strings.Split(hosts, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if f[1] == "localhost" || strings.HasPrefix(f[1], "ip6-") {
			continue
		}
		name = f[1]
	}
	return name
}
