package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/enaprobe/enaprobe/internal/capture"
)

// decodeStrict decodes a manifest into its API type, refusing unknown or
// duplicate fields (a misspelt field would otherwise vanish silently).
func decodeStrict(t *testing.T, path string, into any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestKubernetesManifests decodes the manifests strictly into the Kubernetes
// and Prometheus operator API types and checks what matters: host network,
// not privileged, exactly the capabilities enaprobe checks for, resources
// set, no mount it does not need, and a PodMonitor that selects the pods'
// metrics port.
func TestKubernetesManifests(t *testing.T) {
	var ns corev1.Namespace
	decodeStrict(t, "kubernetes/namespace.yaml", &ns)
	var ds appsv1.DaemonSet
	decodeStrict(t, "kubernetes/daemonset.yaml", &ds)
	var pm monitoringv1.PodMonitor
	decodeStrict(t, "kubernetes/podmonitor.yaml", &pm)
	var sa corev1.ServiceAccount
	decodeStrict(t, "kubernetes/serviceaccount.yaml", &sa)
	if sa.Kind != "ServiceAccount" || sa.Namespace != ns.Name || ds.Spec.Template.Spec.ServiceAccountName != sa.Name {
		t.Errorf("service account %s/%s (%s), the DaemonSet's %q", sa.Namespace, sa.Name, sa.Kind, ds.Spec.Template.Spec.ServiceAccountName)
	}

	if ds.APIVersion != "apps/v1" || ds.Kind != "DaemonSet" || pm.APIVersion != "monitoring.coreos.com/v1" || pm.Kind != "PodMonitor" || ns.Kind != "Namespace" {
		t.Errorf("kinds: %s %s, %s %s, %s", ds.APIVersion, ds.Kind, pm.APIVersion, pm.Kind, ns.Kind)
	}
	if ds.Namespace != ns.Name || pm.Namespace != ns.Name {
		t.Errorf("namespaces: DaemonSet %q, PodMonitor %q, want %q", ds.Namespace, pm.Namespace, ns.Name)
	}
	pod := ds.Spec.Template.Spec
	if !pod.HostNetwork {
		t.Error("the DaemonSet's pods are not on the host network: they would see only their own veth")
	}
	if pod.HostPID || pod.HostIPC {
		t.Error("hostPID or hostIPC: enaprobe needs neither")
	}
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("the selector's %s=%s is not on the pods", k, v)
		}
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("args %v do not run serve", c.Args)
	}
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatal("no securityContext with capabilities")
	}
	if sc.Privileged == nil || *sc.Privileged {
		t.Error("privileged is not set to false")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("the root filesystem is writable")
	}
	var add []string
	for _, c := range sc.Capabilities.Add {
		add = append(add, "CAP_"+string(c))
	}
	slices.Sort(add)
	want := slices.Sorted(slices.Values(capture.RequiredCapabilities))
	if !slices.Equal(add, want) {
		t.Errorf("capabilities added %v, want exactly %v (capture.RequiredCapabilities)", add, want)
	}
	if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("capabilities dropped %v, want [ALL]", sc.Capabilities.Drop)
	}
	checkSeccomp(t, pod, sc)
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
			t.Errorf("no %s request", r)
		}
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || q.Cmp(c.Resources.Requests[corev1.ResourceMemory]) < 0 {
		t.Errorf("memory limit %v missing or under the request", q.String())
	}
	// Mounts: the bundle directory on the host and a scratch /tmp only. No
	// bpffs (nothing is pinned), no /sys, /proc or /dev from the host.
	for _, v := range pod.Volumes {
		if hp := v.HostPath; hp != nil && hp.Path != "/var/lib/enaprobe" && hp.Path != kubeletProfiles {
			t.Errorf("volume %s mounts the host's %s", v.Name, hp.Path)
		}
	}
	var mounts []string
	for _, m := range c.VolumeMounts {
		mounts = append(mounts, m.MountPath)
	}
	if !slices.Equal(mounts, []string{"/var/lib/enaprobe", "/tmp"}) {
		t.Errorf("mounts %v, want the bundle directory and /tmp", mounts)
	}
	bundleArg := slices.IndexFunc(c.Args, func(a string) bool { return a == "--bundle-dir=/var/lib/enaprobe" })
	if bundleArg < 0 {
		t.Errorf("args %v do not write bundles to the mounted /var/lib/enaprobe", c.Args)
	}
	// The metrics port: what the probes, the annotations and the PodMonitor
	// name.
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" {
		t.Fatalf("ports %v, want one named metrics", c.Ports)
	}
	port := c.Ports[0].ContainerPort
	if !slices.ContainsFunc(c.Args, func(a string) bool {
		return strings.HasPrefix(a, "--listen=") && strings.HasSuffix(a, ":"+itoa(port))
	}) {
		t.Errorf("args %v do not listen on port %d", c.Args, port)
	}
	ann := ds.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != itoa(port) || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("scrape annotations %v", ann)
	}
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "metrics" {
			t.Errorf("probe %+v does not ask /healthz on the metrics port", p)
		}
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("PodMonitor endpoints %v, want one", pm.Spec.PodMetricsEndpoints)
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	if ep.Port == nil || *ep.Port != "metrics" || ep.Path != "/metrics" {
		t.Errorf("PodMonitor endpoint %+v, want port metrics, path /metrics", ep)
	}
	for k, v := range pm.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("the PodMonitor selects %s=%s, not on the pods", k, v)
		}
	}
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

// The kubelet's directory of Localhost seccomp profiles, and the
// profiles/ directory under it that the init container writes to.
const (
	kubeletSeccompRoot = "/var/lib/kubelet/seccomp"
	kubeletProfiles    = kubeletSeccompRoot + "/profiles"
)

// checkSeccomp: the probe's container runs the Localhost profile that the
// init container writes (the runtimes' default refuses bpf(2) without
// CAP_SYS_ADMIN); the init container runs enaprobe seccomp-profile, with
// nothing but the kubelet's profiles directory from the host.
func checkSeccomp(t *testing.T, pod corev1.PodSpec, sc *corev1.SecurityContext) {
	t.Helper()
	p := sc.SeccompProfile
	if p == nil || p.Type != corev1.SeccompProfileTypeLocalhost || p.LocalhostProfile == nil {
		t.Fatalf("seccomp profile %v, want Localhost", p)
	}
	if len(pod.InitContainers) != 1 {
		t.Fatalf("%d init containers, want the one that writes the profile", len(pod.InitContainers))
	}
	ic := pod.InitContainers[0]
	var write string
	for _, a := range ic.Args {
		write, _ = strings.CutPrefix(a, "--write=")
	}
	if len(ic.Args) == 0 || ic.Args[0] != "seccomp-profile" || write == "" {
		t.Fatalf("init container args %v, want seccomp-profile --write=FILE", ic.Args)
	}
	if ic.Image != pod.Containers[0].Image {
		t.Errorf("init container image %s, the probe's %s: the profile must be the one of the release that runs", ic.Image, pod.Containers[0].Image)
	}
	hostPaths := map[string]string{}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	var onHost string
	for _, m := range ic.VolumeMounts {
		if rel, ok := strings.CutPrefix(write, m.MountPath+"/"); ok {
			onHost = filepath.Join(hostPaths[m.Name], rel)
		}
	}
	if want := filepath.Join(kubeletSeccompRoot, *p.LocalhostProfile); onHost != want {
		t.Errorf("the init container writes %s on the host, the kubelet reads %s", onHost, want)
	}
	isc := ic.SecurityContext
	if isc == nil || isc.Capabilities == nil || len(isc.Capabilities.Add) > 0 || isc.SeccompProfile == nil || isc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("init container security %+v: want no capability and the runtime's default profile", isc)
	}
}
