package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/enaprobe/enaprobe/analyzer"
)

// JSON writes the result as indented JSON, the document described by
// internal/report/schema/report.schema.json.
func JSON(w io.Writer, r *analyzer.Result) error {
	if r == nil {
		return errors.New("json report: no result")
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("json report: %w", err)
	}
	return nil
}
