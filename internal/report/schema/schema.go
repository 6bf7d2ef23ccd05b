// Package schema holds the JSON Schema of the enaprobe report (the JSON of
// analyzer.Result), embedded so that tools and tests read the very file
// that is published in the repository.
package schema

import _ "embed"

// ReportJSON is internal/report/schema/report.schema.json: JSON Schema draft 2020-12 of the
// report written by `enaprobe trace --json` and report.JSON.
//
//go:embed report.schema.json
var ReportJSON []byte

// ReportID is the $id of ReportJSON.
const ReportID = "https://github.com/enaprobe/enaprobe/internal/report/schema/report.schema.json"
