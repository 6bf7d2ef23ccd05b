package report

import (
	"cmp"
	"fmt"
)

// headerField is one labelled entry of a report's header, one or more lines.
type headerField struct {
	Label string
	Lines []string
}

// reportHeader is the title and the header fields of a report, the one
// source of both the text and the HTML header.
func reportHeader(in Input) (title string, fields []headerField) {
	res, env := in.Result, in.Env
	tr := res.Trace
	host := cmp.Or(env.Hostname, tr.Hostname, "unknown host")
	itype := cmp.Or(tr.InstanceType, env.InstanceType, "instance type unknown")
	title = fmt.Sprintf("enaprobe report: %s (%s)", host, itype)
	version := cmp.Or(env.EnaprobeVersion, tr.ProbeVersion, "unknown")
	if env.CommandLine != "" {
		version += "; " + env.CommandLine
	}
	var ifaceLines []string
	for _, e := range tr.ENA {
		ifaceLines = append(ifaceLines, interfaceLine(e, env))
	}
	fields = []headerField{
		{"Host", []string{fmt.Sprintf("%s, %s, kernel %s", host, itype, cmp.Or(env.Kernel, tr.Kernel, "unknown"))}},
		{"enaprobe", []string{version}},
		{"Trace", []string{fmt.Sprintf("%s -> %s UTC (%s)",
			tr.Start.UTC().Format("2006-01-02 15:04:05.000"), fmtClock(tr.End, tr.Start), fmtSeconds(tr.DurationS))}},
		{"Capture", []string{captureText(cmp.Or(env.AttachMode, tr.AttachMode, "unknown"), cmp.Or(env.BucketMode, tr.BucketMode), tr)}},
		{"Interfaces", ifaceLines},
		{"Limits", limitLines(tr.Limits)},
		{"Notes", tr.Notes},
	}
	return title, fields
}
