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
	Env       record.Environment
}
