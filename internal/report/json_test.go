package report

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/report/schema"
)

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema.ReportJSON))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat() // date-time is checked, not only annotated
	if err := c.AddResource(schema.ReportID, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(schema.ReportID)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// validJSON is res's JSON report, which must validate against the schema
// (an error, not a stop, where it does not).
func validJSON(t *testing.T, res *analyzer.Result) string {
	t.Helper()
	var buf bytes.Buffer
	if err := JSON(&buf, res); err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := compileSchema(t).Validate(inst); err != nil {
		t.Errorf("json report does not validate: %v", err)
	}
	return buf.String()
}

// TestJSONValidatesAgainstSchema renders every recording in testdata, plain
// and redacted, and validates the JSON against the published schema.
func TestJSONValidatesAgainstSchema(t *testing.T) {
	sch := compileSchema(t)
	for _, name := range allRecordings(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in := loadInput(t, name)
			for _, res := range []*analyzer.Result{in.Result, Redact(in).Result} {
				var buf bytes.Buffer
				if err := JSON(&buf, res); err != nil {
					t.Fatal(err)
				}
				inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(buf.Bytes()))
				if err != nil {
					t.Fatal(err)
				}
				if err := sch.Validate(inst); err != nil {
					t.Fatalf("report JSON does not validate: %v", err)
				}
				var back analyzer.Result
				if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
					t.Fatalf("report JSON does not decode into analyzer.Result: %v", err)
				}
			}
		})
	}
}

// TestSchemaRejectsDrift makes sure the validation above can fail: an
// unknown field, an unknown finding kind and a malformed endpoint are each
// refused.
func TestSchemaRejectsDrift(t *testing.T) {
	sch := compileSchema(t)
	in := loadInput(t, "microburst_out")
	var buf bytes.Buffer
	if err := JSON(&buf, in.Result); err != nil {
		t.Fatal(err)
	}
	mutations := map[string]func(m map[string]any){
		"unknown top-level field": func(m map[string]any) { m["extra"] = 1 },
		"unknown finding kind": func(m map[string]any) {
			m["findings"].([]any)[0].(map[string]any)["kind"] = "microburst_sideways"
		},
		"endpoint without port": func(m map[string]any) {
			f := m["findings"].([]any)[0].(map[string]any)["flows"].([]any)[0].(map[string]any)
			f["src"] = "10.0.0.10"
		},
		"start not a date-time": func(m map[string]any) { m["trace"].(map[string]any)["start"] = "yesterday" },
		"missing loss":          func(m map[string]any) { delete(m, "loss") },
	}
	for name, mutate := range mutations {
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		mutate(m)
		b, _ := json.Marshal(m)
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if sch.Validate(inst) == nil {
			t.Errorf("%s: schema accepted it", name)
		}
	}
}
