package report

import (
	"bytes"
	"errors"
	"io"

	"github.com/enaprobe/enaprobe/internal/record"
)

// The reports of a bundle; record owns the rest of its layout.
const (
	BundleReportJSON = "report.json"
	BundleReportText = "report.txt"
	BundleReportHTML = "report.html"
)

// WriteBundle writes everything about one trace to path: the JSON, text
// and HTML reports rendered here, with the recording and the environment
// (record.WriteBundle). Both Result and Recording are required: a bundle is
// meant to be analyzed again (record.ReadBundle).
func WriteBundle(p string, in Input) error {
	if in.Result == nil || in.Recording == nil {
		return errors.New("write bundle: a bundle needs both the result and the recording")
	}
	var files []record.BundleFile
	for _, r := range []struct {
		name   string
		render func(io.Writer) error
	}{
		{BundleReportJSON, func(w io.Writer) error { return JSON(w, in.Result) }},
		{BundleReportText, func(w io.Writer) error { return Text(w, in) }},
		{BundleReportHTML, func(w io.Writer) error { return HTML(w, in) }},
	} {
		var buf bytes.Buffer
		if err := r.render(&buf); err != nil {
			return err
		}
		files = append(files, record.BundleFile{Name: r.name, Data: buf.Bytes()})
	}
	return record.WriteBundle(p, in.Recording, in.Env, files...)
}
