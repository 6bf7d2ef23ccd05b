package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/serve/metrics"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// exported is what serve exports: every family of its registry (gathered
// without running serve) and the label names of each.
type exported map[string][]string

func serveMetrics(t *testing.T) exported {
	t.Helper()
	m := metrics.New([]string{"ens5"})
	m.ConntrackAllowanceAvailable.WithLabelValues("ens5").Set(1000) // a device with the gauge reported it
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := exported{}
	for _, f := range fams {
		var labels []string
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(labels, l.GetName()) {
					labels = append(labels, l.GetName())
				}
			}
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			out[f.GetName()+"_bucket"] = append(slices.Clone(labels), "le")
			out[f.GetName()+"_sum"] = labels
			out[f.GetName()+"_count"] = labels
		case dto.MetricType_SUMMARY:
			out[f.GetName()] = append(slices.Clone(labels), "quantile")
			out[f.GetName()+"_sum"] = labels
			out[f.GetName()+"_count"] = labels
		default:
			out[f.GetName()] = labels
		}
	}
	return out
}

// targetLabels are what Prometheus adds to every series it scrapes.
var targetLabels = []string{"instance", "job"}

// check parses a PromQL expression and returns what in it serve does not
// export: metric names, and labels that a selector matches or an
// aggregation keeps which none of the expression's metrics has.
func (e exported) check(expr string) []string {
	ast, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	have := slices.Clone(targetLabels)
	var groupings [][]string
	parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			labels, ok := e[n.Name]
			if !ok {
				problems = append(problems, fmt.Sprintf("metric %s is not exported by serve", n.Name))
				return nil
			}
			have = append(have, labels...)
			for _, m := range n.LabelMatchers {
				if m.Name != "__name__" && !slices.Contains(labels, m.Name) && !slices.Contains(targetLabels, m.Name) {
					problems = append(problems, fmt.Sprintf("%s has no label %s", n.Name, m.Name))
				}
			}
		case *parser.AggregateExpr:
			groupings = append(groupings, n.Grouping)
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				groupings = append(groupings, n.VectorMatching.MatchingLabels)
			}
		}
		return nil
	})
	for _, g := range groupings {
		for _, l := range g {
			if !slices.Contains(have, l) {
				problems = append(problems, fmt.Sprintf("label %s is on none of the metrics", l))
			}
		}
	}
	return problems
}

// TestAlertRules checks the rules with Prometheus's own checker and unit
// tests (promtool), decodes them strictly as a PrometheusRule's groups, and
// checks each expression against what serve exports.
func TestAlertRules(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		privtest.Unavailable(t, "promtool (Debian: prometheus; .ci/deps installs it)")
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.Command("promtool", args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	var spec monitoringv1.PrometheusRuleSpec
	decodeStrict(t, "prometheus/alerts.yaml", &spec)
	e := serveMetrics(t)
	alerts := 0
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			alerts++
			for _, p := range e.check(r.Expr.String()) {
				t.Errorf("alert %s: %s", r.Alert, p)
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s lacks a severity, summary or description", r.Alert)
			}
		}
	}
	if alerts == 0 {
		t.Fatal("no alert rules")
	}
	// Every allowance has an alert.
	raw, err := os.ReadFile("prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range metrics.Allowances {
		if !regexp.MustCompile(`enaprobe_allowance_exceeded_total\{allowance=~?"[a-z_|]*\b` + a + `\b`).Match(raw) {
			t.Errorf("no alert on allowance %s", a)
		}
	}
	// "Low" is the analyzer's share of the highest value.
	share := fmt.Sprintf("<= %g * max_over_time(enaprobe_conntrack_allowance_available", analyzer.DefaultOptions().ConntrackLowShare)
	if !strings.Contains(string(raw), share) {
		t.Errorf("the conntrack alert does not use the analyzer's ConntrackLowShare (%q)", share)
	}
}

// grafanaVariables are replaced before parsing: Grafana substitutes them.
var grafanaVariables = strings.NewReplacer(
	"$__rate_interval", "1m", "$__interval", "30s", "$__range", "6h",
	"$instance", "node", "$interface", "ens5",
)

// labelValues is Grafana's label_values(SELECTOR, LABEL) variable query.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-z_]+)\)$`)

// TestDashboard parses every query of the Grafana dashboard (panels,
// variables, annotations) as PromQL and checks its metrics and labels
// against what serve exports.
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile("grafana/enaprobe.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Annotations struct {
			List []struct {
				Name string `json:"name"`
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("grafana/enaprobe.json: %v", err)
	}
	e := serveMetrics(t)
	used := map[string]bool{}
	checkExpr := func(where, expr string) {
		if expr == "" {
			t.Errorf("%s: empty query", where)
			return
		}
		for _, p := range e.check(grafanaVariables.Replace(expr)) {
			t.Errorf("%s: %s\n\t%s", where, p, expr)
		}
		for name := range e {
			if regexp.MustCompile(`\b` + name + `\b`).MatchString(expr) {
				used[name] = true
			}
		}
	}
	queries := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			checkExpr("panel "+p.Title, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: %v", v.Name, err)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(SELECTOR, LABEL)", v.Name, q.Query)
			continue
		}
		checkExpr("variable "+v.Name, fmt.Sprintf("count by (%s) (%s)", m[2], m[1]))
	}
	for _, a := range dash.Annotations.List {
		checkExpr("annotation "+a.Name, a.Expr)
	}
	if queries < 10 {
		t.Errorf("%d queries: the dashboard lost its panels", queries)
	}
	// What the issue names must be on the dashboard.
	for _, name := range []string{"enaprobe_allowance_exceeded_total", "enaprobe_conntrack_allowance_available",
		"enaprobe_peak_bits_per_second", "enaprobe_linklocal_packets_total", "enaprobe_findings_total",
		"enaprobe_bundles_written_total", "enaprobe_packets_total", "enaprobe_bytes_total", "enaprobe_syns_total"} {
		if !used[name] {
			t.Errorf("no panel shows %s", name)
		}
	}
}

// TestCheckFindsUnknownNames: the check above fails on a name or a label
// serve does not export, and on a query that does not parse.
func TestCheckFindsUnknownNames(t *testing.T) {
	e := serveMetrics(t)
	for expr, want := range map[string]string{
		`rate(enaprobe_allowance_exceeded_totals[5m])`:                                 "not exported",
		`enaprobe_allowance_exceeded_total{iface="ens5"}`:                              "no label iface",
		`sum by (iface) (enaprobe_packets_total)`:                                      "label iface",
		`rate(enaprobe_packets_total[5m]`:                                              "unclosed",
		`histogram_quantile(0.9, rate(enaprobe_ena_read_duration_seconds_bucket[5m]))`: "",
	} {
		got := strings.Join(e.check(expr), "; ")
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("check(%s) = %q, want %q", expr, got, want)
		}
	}
}
