package schema

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/goconst"
)

func TestSchemaCompiles(t *testing.T) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(ReportJSON))
	if err != nil {
		t.Fatalf("parse schema: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(ReportID, doc); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compile(ReportID); err != nil {
		t.Fatalf("compile schema: %v", err)
	}
}

// schemaDoc is the schema as plain JSON values, for walking beside the Go
// types.
type schemaDoc struct {
	root map[string]any
	defs map[string]any
}

func loadDoc(t *testing.T) schemaDoc {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal(ReportJSON, &root); err != nil {
		t.Fatal(err)
	}
	defs, _ := root["$defs"].(map[string]any)
	return schemaDoc{root: root, defs: defs}
}

// resolve follows $ref chains to the node that says what the value is.
func (d schemaDoc) resolve(t *testing.T, path string, node map[string]any) map[string]any {
	t.Helper()
	for i := 0; i < 10; i++ {
		ref, ok := node["$ref"].(string)
		if !ok {
			return node
		}
		name, ok := strings.CutPrefix(ref, "#/$defs/")
		def, found := d.defs[name].(map[string]any)
		if !ok || !found {
			t.Fatalf("%s: unresolvable $ref %q", path, ref)
		}
		node = def
	}
	t.Fatalf("%s: $ref loop", path)
	return nil
}

// TestSchemaMatchesResult walks analyzer.Result and the schema together: every
// struct must be a closed object whose properties are exactly its json
// names and whose required list is exactly its fields without omitempty, and
// every leaf must have the JSON type its Go type encodes to. Adding, renaming
// or dropping a Result field without updating the schema fails here.
func TestSchemaMatchesResult(t *testing.T) {
	d := loadDoc(t)
	checkType(t, d, "result", reflect.TypeFor[analyzer.Result](), d.root)
}

var timeType = reflect.TypeFor[time.Time]()

func checkType(t *testing.T, d schemaDoc, path string, typ reflect.Type, node map[string]any) {
	t.Helper()
	node = d.resolve(t, path, node)
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ == timeType {
		if node["type"] != "string" || node["format"] != "date-time" {
			t.Errorf("%s: time.Time must be a date-time string, schema says %v", path, node)
		}
		return
	}
	switch typ.Kind() {
	case reflect.Struct:
		checkStruct(t, d, path, typ, node)
	case reflect.Slice:
		if node["type"] != "array" {
			t.Errorf("%s: slice must be an array, schema type %v", path, node["type"])
			return
		}
		items, ok := node["items"].(map[string]any)
		if !ok {
			t.Errorf("%s: array without items", path)
			return
		}
		checkType(t, d, path+"[]", typ.Elem(), items)
	case reflect.Map:
		// A map with string keys is an object whose values all have the
		// element's schema.
		if typ.Key().Kind() != reflect.String || node["type"] != "object" {
			t.Errorf("%s: map must have string keys and be an object, schema type %v", path, node["type"])
			return
		}
		values, ok := node["additionalProperties"].(map[string]any)
		if !ok {
			t.Errorf("%s: object of a map without additionalProperties' schema", path)
			return
		}
		checkType(t, d, path+"{}", typ.Elem(), values)
	case reflect.String:
		checkLeaf(t, path, node, "string")
	case reflect.Bool:
		checkLeaf(t, path, node, "boolean")
	case reflect.Float32, reflect.Float64:
		checkLeaf(t, path, node, "number")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		checkLeaf(t, path, node, "integer")
	default:
		t.Errorf("%s: Go kind %s not handled by this test", path, typ.Kind())
	}
}

// checkLeaf accepts a schema leaf typed as want, or an enum of values of
// that JSON type.
func checkLeaf(t *testing.T, path string, node map[string]any, want string) {
	t.Helper()
	if enum, ok := node["enum"].([]any); ok {
		for _, v := range enum {
			if jsonType(v) != want {
				t.Errorf("%s: enum value %v is not a %s", path, v, want)
			}
		}
		return
	}
	got, _ := node["type"].(string)
	if got != want {
		t.Errorf("%s: schema type %q, Go type encodes as %q", path, got, want)
	}
}

func jsonType(v any) string {
	switch x := v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	}
	return "other"
}

func checkStruct(t *testing.T, d schemaDoc, path string, typ reflect.Type, node map[string]any) {
	t.Helper()
	if node["type"] != "object" {
		t.Errorf("%s: struct %s must be an object, schema type %v", path, typ, node["type"])
		return
	}
	if node["additionalProperties"] != false {
		t.Errorf("%s: object must set additionalProperties false so that drift fails", path)
	}
	props, _ := node["properties"].(map[string]any)
	var names, required []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			t.Errorf("%s: field %s.%s has no json name", path, typ.Name(), f.Name)
			continue
		}
		names = append(names, name)
		if !slices.Contains(strings.Split(opts, ","), "omitempty") {
			required = append(required, name)
		}
		p, ok := props[name].(map[string]any)
		if !ok {
			t.Errorf("%s: field %s.%s (json %q) missing from the schema", path, typ.Name(), f.Name, name)
			continue
		}
		checkType(t, d, path+"."+name, f.Type, p)
	}
	for name := range props {
		if !slices.Contains(names, name) {
			t.Errorf("%s: schema property %q is no field of %s", path, name, typ.Name())
		}
	}
	var schemaRequired []string
	for _, r := range node["required"].([]any) {
		schemaRequired = append(schemaRequired, r.(string))
	}
	slices.Sort(required)
	slices.Sort(schemaRequired)
	if !slices.Equal(required, schemaRequired) {
		t.Errorf("%s: schema requires %v, the Go fields without omitempty are %v", path, schemaRequired, required)
	}
}

func enumOf(t *testing.T, d schemaDoc, def, prop string) []string {
	t.Helper()
	props := d.defs[def].(map[string]any)["properties"].(map[string]any)
	node := d.resolve(t, def+"."+prop, props[prop].(map[string]any))
	var out []string
	for _, v := range node["enum"].([]any) {
		out = append(out, v.(string))
	}
	slices.Sort(out)
	return out
}

func TestSchemaEnumsMatchConstants(t *testing.T) {
	d := loadDoc(t)
	kinds := goconst.Strings(t, "../../../analyzer", "Kind")
	if len(kinds) < 9 {
		t.Fatalf("found only %d Kind constants in ../../../analyzer: %v", len(kinds), kinds)
	}
	if got := enumOf(t, d, "finding", "kind"); !slices.Equal(got, kinds) {
		t.Errorf("finding.kind enum %v, analyzer kinds %v", got, kinds)
	}
	if got, want := enumOf(t, d, "finding", "severity"), goconst.Strings(t, "../../../analyzer", "Severity"); !slices.Equal(got, want) {
		t.Errorf("finding.severity enum %v, analyzer severities %v", got, want)
	}
	sizes := slices.Sorted(slices.Values(record.SizeClassNames))
	if got := enumOf(t, d, "size_class_count", "class"); !slices.Equal(got, sizes) {
		t.Errorf("size class enum %v, record.SizeClassNames %v", got, sizes)
	}
	var classes []string
	for c := range record.Class(record.NumClasses) {
		classes = append(classes, c.String())
	}
	slices.Sort(classes)
	if got := enumOf(t, d, "class_total", "class"); !slices.Equal(got, classes) {
		t.Errorf("class_total.class enum %v, record classes %v", got, classes)
	}
	var services []string
	for _, s := range record.Services {
		services = append(services, s.String())
	}
	slices.Sort(services)
	if got := enumOf(t, d, "flow_share", "service"); !slices.Equal(got, services) {
		t.Errorf("service enum %v, record.Services %v", got, services)
	}
}
