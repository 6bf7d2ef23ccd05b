package report

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

// Text writes the report for a terminal (the default output of `enaprobe
// trace`): a header saying what was traced and against which limits, the
// findings ranked by severity then time, the traffic profile, the NIC
// counters and what the trace could not see. Lines are at most 100
// columns.
func Text(w io.Writer, in Input) error {
	if in.Result == nil {
		return errors.New("text report: no result")
	}
	var p page
	textHeader(&p, in)
	textFindings(&p, in.Result)
	textProfile(&p, in.Result)
	textCounters(&p, in.Result)
	textLoss(&p, in.Result)
	if _, err := io.WriteString(w, p.b.String()); err != nil {
		return fmt.Errorf("write text report: %w", err)
	}
	return nil
}

const labelWidth = 13

func textHeader(p *page, in Input) {
	title, fields := reportHeader(in)
	p.line(title)
	p.line(strings.Repeat("=", len([]rune(title))))
	for _, f := range fields {
		for i, l := range f.Lines {
			label := ""
			if i == 0 {
				label = f.Label
			}
			p.field("", label, labelWidth, l)
		}
	}
}

// interfaceLine describes an interface's driver and allowance counters.
func interfaceLine(e analyzer.InterfaceENA, env record.Environment) string {
	driver := cmp.Or(e.Driver, "driver unknown")
	mtu := 0
	for _, i := range env.Interfaces {
		if i.Name == e.Interface {
			driver = cmp.Or(e.Driver, i.Driver, "driver unknown")
			mtu = i.MTU
		}
	}
	if !e.ENA {
		return fmt.Sprintf("%s (%s): no ENA allowance counters; packet profile only", e.Interface, driver)
	}
	s := e.Interface + ": " + strings.TrimSpace(driver+" "+e.DriverVersion)
	if mtu > 0 {
		s += fmt.Sprintf(", MTU %d", mtu)
	}
	total := len(e.Present) + len(e.Absent)
	s += fmt.Sprintf("; allowance counters: %d of %d read in %s samples", len(e.Present), total, fmtCount(e.Reads))
	if len(e.Absent) > 0 {
		s += " (absent, nothing can be concluded from them: " + strings.Join(e.Absent, ", ") + ")"
	}
	return s
}

// captureText says how the trace was taken, and how its counters were read
// only when some were.
func captureText(attach, bucketModeName string, tr analyzer.TraceInfo) string {
	counters := "no allowance counters read"
	if src := tr.CounterSource; src != "" && src != "none" {
		counters = fmt.Sprintf("counters read every %s (source: %s)", fmtSeconds(tr.SampleMs/1e3), src)
	}
	return fmt.Sprintf("%s attach; %s buckets%s; findings located to %s windows; %s", attach,
		fmtSeconds(float64(tr.BucketUs)/1e6), bucketMode(bucketModeName), fmtSeconds(float64(tr.FineWindowUs)/1e6), counters)
}

// limitLines say each limit and where its value came from.
func limitLines(l analyzer.Limits) []string {
	source := func(x analyzer.Limit) string { return cmp.Or(x.Source, "unknown") }
	var out []string
	switch {
	case !l.BaselineBps.Known && !l.BurstBps.Known:
		out = append(out, "baseline and burst per direction unknown: give --instance-type, or --baseline and --burst")
	case l.BaselineBps.Source == l.BurstBps.Source:
		out = append(out, fmt.Sprintf("baseline %s, burst %s per direction (from %s)",
			fmtLimit(l.BaselineBps, fmtBps), fmtLimit(l.BurstBps, fmtBps), source(l.BaselineBps)))
	default:
		out = append(out, limitText("baseline", " per direction", l.BaselineBps, fmtBps), limitText("burst", " per direction", l.BurstBps, fmtBps))
	}
	out = append(out, limitText("per flow (5-tuple)", "", l.FlowLimitBps, fmtBps),
		limitText("link-local (DNS + IMDS + NTP)", " per interface", l.LinkLocalPPS, fmtPPS))
	if l.PPSAllowance.Known {
		out = append(out, fmt.Sprintf("packets/s %s, both directions (from %s)", fmtLimit(l.PPSAllowance, fmtPPS), source(l.PPSAllowance)))
	}
	return out
}

// limitText is one limit with where its value came from, or that it is
// unknown (never "unknown (from unknown)").
func limitText(name, per string, l analyzer.Limit, format func(float64) string) string {
	if !l.Known {
		return name + per + " unknown"
	}
	return fmt.Sprintf("%s %s%s (from %s)", name, format(l.Value), per, cmp.Or(l.Source, "unknown"))
}

// bucketMode is how the buckets were kept, for the Capture line: " (per-cpu)"
// or " (shared)", nothing when the recording does not say.
func bucketMode(mode string) string {
	if mode == "" {
		return ""
	}
	return " (" + mode + ")"
}
