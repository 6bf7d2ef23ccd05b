// Package deploy holds what runs enaprobe on a fleet: the systemd unit, the
// Kubernetes manifests, the Prometheus alert rules and the Grafana dashboard
// (see docs/deploy.md). Its tests check each the way its own
// tool would, and `make release`, whose binaries they install.
package deploy
