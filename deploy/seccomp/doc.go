// Package seccomp holds enaprobe.json, the seccomp profile enaprobe's
// container runs with, and its generator (gen.go).
package seccomp

//go:generate go run gen.go
