// Package report renders one analyzed trace for people and machines: plain
// text for the terminal, JSON (validated by internal/report/schema/report.schema.json), one
// self-contained HTML page with SVG charts, and a bundle of all of them with
// the recording, which `enaprobe analyze` reads back. Redact makes any of
// them fit to leave the company.
package report

import (
	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

// Input is what a report is rendered from. Result is required. Recording is
// needed for the bucket-resolution charts of the HTML report and for a
// bundle; without it the HTML report shows the analysis only.
type Input struct {
	Result    *analyzer.Result
	Recording *record.Recording
	Env       Environment
}

// Environment is where and how the trace was taken, beyond what the
// recording's metadata holds. It is written to environment.json in a bundle.
type Environment struct {
	EnaprobeVersion string             `json:"enaprobe_version"`
	Kernel          string             `json:"kernel"`
	Hostname        string             `json:"hostname"`
	InstanceType    string             `json:"instance_type"`
	AttachMode      string             `json:"attach_mode"`
	BucketMode      string             `json:"bucket_mode"` // per-cpu or shared
	CommandLine     string             `json:"command_line"`
	Interfaces      []InterfaceEnviron `json:"interfaces"`
}

// InterfaceEnviron is one traced interface and its driver.
type InterfaceEnviron struct {
	Name          string `json:"name"`
	Driver        string `json:"driver"`
	DriverVersion string `json:"driver_version"`
	ENA           bool   `json:"ena"` // allowance counters available
	MTU           int    `json:"mtu"`
}

// EnvironmentOf fills an Environment from a recording's metadata, for a
// caller that has nothing more (CommandLine stays empty).
func EnvironmentOf(rec *record.Recording) Environment {
	m := rec.Meta
	env := Environment{EnaprobeVersion: m.Version, Kernel: m.Kernel, Hostname: m.Hostname,
		InstanceType: m.InstanceType, AttachMode: m.AttachMode, BucketMode: m.BucketMode, Interfaces: []InterfaceEnviron{}}
	for _, i := range m.Interfaces {
		env.Interfaces = append(env.Interfaces, InterfaceEnviron{Name: i.Name, Driver: i.Driver,
			DriverVersion: i.DriverVersion, ENA: i.ENA, MTU: i.MTU})
	}
	return env
}
