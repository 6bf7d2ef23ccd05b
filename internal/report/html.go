package report

import (
	"bytes"
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

// The page is one file that opens offline: the style sheet and the script
// are inlined, the charts are SVG generated here, fonts are the system's.
var (
	//go:embed html/report.tmpl
	htmlTemplate string
	//go:embed html/style.css
	htmlStyle string
	//go:embed html/errors.js
	htmlErrorsScript string
	//go:embed html/hover.js
	htmlHoverScript string
)

var pageTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"bps":          fmtBps,
	"pps":          fmtPPS,
	"bytes":        func(v uint64) string { return fmtBytes(float64(v)) },
	"count":        func(v uint64) string { return fmtCount(v) },
	"int":          func(v int) string { return fmtCount(v) },
	"share":        fmtShare,
	"seconds":      fmtSeconds,
	"offset":       fmtOffset,
	"evidence":     fmtEvidence,
	"incident":     incidentText,
	"victims":      victimsLine,
	"gauge":        gaugeText,
	"imdsclient":   imdsClientText,
	"imdsrequests": imdsRequestTexts,
	"llfixes":      linkLocalFixTexts,
	"llbasis":      linkLocalBasis,
	"llclients":    linkLocalHTMLClients,
	"limitpps":     func(l analyzer.Limit) string { return fmtLimit(l, fmtPPS) },
	"flow":         flowString,
	"us":           func(v float64) string { return fmtSeconds(v / 1e6) },
	"upper":        strings.ToUpper,
}).Parse(htmlTemplate))

// htmlPage is what the template renders.
type htmlPage struct {
	Title       string
	Res         *analyzer.Result
	Env         record.Environment
	Header      []headerField
	Findings    []htmlFinding
	Interfaces  []htmlInterface
	Gaps        []string
	LinkLocal   []figure
	SizeMix     []figure
	NoRecording bool
	Severities  map[string]int

	Rates, Totals, TopFlows, LinkLocalTable htmlTable
	SizeTable, Latency, Counters, Loss      htmlTable
	RatesPartial                            bool
	PartialNote, LossSentence               string
	LossDetails                             []string
	LossClean                               bool
	Generated                               string
	Style                                   template.CSS
	ErrorsJS                                template.JS
	HoverJS                                 template.JS
}

type htmlFinding struct {
	N        int
	F        analyzer.Finding
	When     string
	Counters string
	Evidence htmlTable
	Flows    htmlTable
	Owners   string // the finding's owners ranked, on one line
	Zoom     *figure
	Strip    template.HTML // the incident's counter jumps under the zoom
	// ImpactStrip shows, under the zoom, the segments sent again and the
	// victims' srtt; Victims is the impact's victims table.
	ImpactStrip template.HTML
	Victims     htmlTable
	// RepeatOf is the number of the info finding of the same kind and
	// interface just before this one, whose evidence and fix it shares: the
	// page shows it in short, as the text report does. 0 for the others.
	RepeatOf int
}

type htmlInterface struct {
	Name    string
	Note    string
	Figures []figure
}

// HTML writes the report as one self-contained page: the header, the
// findings with a zoom chart of each, whole-trace throughput and packet
// rate charts per interface at bucket resolution with counter jumps, the
// link-local and packet-size charts, and the tables of the text report.
// Without in.Recording the time charts are left out (and the page says so).
func HTML(w io.Writer, in Input) error {
	if in.Result == nil {
		return errors.New("html report: no result")
	}
	page := buildPage(in)
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, page); err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write html report: %w", err)
	}
	return nil
}

func buildPage(in Input) htmlPage {
	res, env := in.Result, in.Env
	tr := res.Trace
	title, header := reportHeader(in)
	p := htmlPage{
		Title: title, Res: res, Env: env,
		Style: template.CSS(htmlStyle), ErrorsJS: template.JS(htmlErrorsScript), HoverJS: template.JS(htmlHoverScript),
		NoRecording: in.Recording == nil,
	}
	for _, f := range header {
		if len(f.Lines) > 0 {
			p.Header = append(p.Header, f)
		}
	}
	var tl *timeline
	if in.Recording != nil {
		tl = newTimeline(in.Recording, res)
	}
	ranked := rankedFindings(res)
	for i, f := range ranked {
		x0, x1 := zoomRange(f)
		hf := htmlFinding{N: i + 1, F: f, When: findingWhen(f, tr.Start), Counters: findingCounterText(res, f),
			Evidence: evidenceTable(f), Flows: flowShareHTMLTable(f), Strip: jumpStrip(f, x0, x1),
			Owners: ownersText(f.Owners)}
		if f.Impact != nil {
			hf.Victims = impactHTMLTable(f.Impact)
		}
		if i > 0 && repeatsInfo(ranked[i-1], f) {
			hf.RepeatOf = cmp.Or(p.Findings[i-1].RepeatOf, p.Findings[i-1].N)
		}
		if tl != nil {
			if z, ok := tl.zoom(i+1, f); ok {
				hf.Zoom = &z
				hf.Strip = jumpStrip(f, z.X0, z.X1)
				hf.ImpactStrip = impactStrip(in.Recording, f, z.X0, z.X1)
			}
		}
		p.Findings = append(p.Findings, hf)
	}
	for _, name := range tr.Interfaces {
		hi := htmlInterface{Name: name}
		for _, e := range tr.ENA {
			if e.Interface == name && !e.ENA {
				hi.Note = fmt.Sprintf("%s (%s): no ENA allowance counters; packet profile only.", name,
					cmp.Or(e.Driver, "driver unknown"))
			}
		}
		if tl != nil {
			hi.Figures = tl.interfaceFigures(name)
		}
		p.Interfaces = append(p.Interfaces, hi)
	}
	p.Severities = map[string]int{}
	for _, f := range res.Findings {
		p.Severities[f.Severity]++
	}
	h, rows, partial := rateRows(res.Profile.Rates)
	p.Rates, p.RatesPartial, p.PartialNote = rowsTable(h, rows, 3), partial, partialNote
	h, rows = totalsRows(res.Totals)
	p.Totals = rowsTable(h, rows, 2)
	p.TopFlows = topFlowsTable(res.Profile.TopFlows, res.Trace.Start)
	p.LinkLocalTable = linkLocalTable(res.Profile.LinkLocal)
	p.SizeTable = sizeMixTable(res.Profile.SizeMix)
	p.Latency = latencyTable(res.Profile.CounterReadLatency)
	p.Counters = countersTable(res.Counters)
	h, rows = lossRows(res.Loss)
	p.Loss = rowsTable(h, rows, 1)
	p.LossSentence = lossSentence(res.Loss)
	p.LossClean = res.Loss.Total == (analyzer.LossCounts{}) && res.Loss.CounterReadFailures == 0 && res.Loss.CounterResets == 0
	for _, f := range res.Loss.ReadFailures {
		p.LossDetails = append(p.LossDetails, "read failed: "+readFailureText(f, tr.Start))
	}
	for _, r := range res.Loss.Resets {
		p.LossDetails = append(p.LossDetails, "reset: "+resetText(r, tr.Start))
	}
	for _, r := range res.Profile.Rates {
		if s := dashboardGap(r); s != "" {
			p.Gaps = append(p.Gaps, s)
		}
	}
	if tl != nil {
		p.LinkLocal = tl.linkLocalFigures()
	}
	p.SizeMix = sizeMixFigures(res)
	p.Generated = time.Now().UTC().Format(time.RFC3339)
	return p
}
