// Package seccomp holds enaprobe.json, the seccomp profile enaprobe's
// container runs with (the runtimes' default, allowing bpf(2)), and its
// generator gen.go; `enaprobe seccomp-profile` writes it, so that the
// DaemonSet's init container can put it where the kubelet reads it.
package seccomp

import _ "embed"

//go:generate go run gen.go

// Source is the profile gen.go starts from: the runtimes' default as
// Debian's golang-github-containers-common installs it (./.ci/deps).
const Source = "/usr/share/containers/seccomp.json"

// Profile is enaprobe.json.
//
//go:embed enaprobe.json
var Profile []byte
