package alerts_test

import (
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/util/teststorage"
	"sigs.k8s.io/yaml"

	"github.com/initlock/initlock/internal/kubeenv"
)

// Job is the job label of the manager's series: the name of the metrics
// Service, as the ServiceMonitor's default job label makes it.
const job = "initlock-controller-manager-metrics"

// The scrape interval of the ServiceMonitor and the evaluation interval of
// the rule group, read from config/monitoring.
var scrapeInterval, evalInterval time.Duration

// monitoring holds what the test reads from config/monitoring.
type monitoring struct {
	// rules are the alerting rules, parsed and checked by rulefmt.
	rules []rulefmt.Rule
	// scheme, path and port of the ServiceMonitor's endpoint.
	scheme, path, port string
	// selector is the ServiceMonitor's selector of Services.
	selector map[string]string
}

// readMonitoring reads the ServiceMonitor and the PrometheusRule of
// config/monitoring; rulefmt checks the rules as Prometheus loads a rule
// file (their PromQL and templates included).
func readMonitoring(t *testing.T) monitoring {
	t.Helper()
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	b, err := os.ReadFile(filepath.Join(root, "config", "monitoring", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rule); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	file, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(file, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("prometheusrule.yaml is not a valid rule file: %v", errs)
	}
	var m monitoring
	for _, g := range groups.Groups {
		evalInterval = time.Duration(g.Interval)
		m.rules = append(m.rules, g.Rules...)
	}
	var sm struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port, Scheme, Path, Interval string
			} `json:"endpoints"`
		} `json:"spec"`
	}
	b, err = os.ReadFile(filepath.Join(root, "config", "monitoring", "servicemonitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &sm); err != nil || len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("servicemonitor.yaml: %v, %d endpoints", err, len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	m.scheme, m.path, m.port, m.selector = ep.Scheme, ep.Path, ep.Port, sm.Spec.Selector.MatchLabels
	if scrapeInterval, err = time.ParseDuration(ep.Interval); err != nil || evalInterval == 0 {
		t.Fatalf("scrape interval %q (%v), evaluation interval %s", ep.Interval, err, evalInterval)
	}
	return m
}

// timeline records scrapes of targets into a TSDB at simulated times and
// evaluates the alerting rules at every evaluation interval, as a
// Prometheus server with the ServiceMonitor and the PrometheusRule would.
type timeline struct {
	t      *testing.T
	db     *teststorage.TestStorage
	engine *promql.Engine
	alerts []*rules.AlertingRule
	// start is when the timeline began, now its current simulated time
	// and lastRun the last evaluation time.
	start, now, lastRun time.Time
	// series are the series each instance's last scrape appended, to mark
	// them stale when a scrape fails; lastSamples are its samples, for
	// hold.
	series      map[string][]labels.Labels
	lastSamples map[string][]sample
	// fired are the alerts seen firing, by name, with their labels.
	fired map[string][]labels.Labels
	// pending are the alerts seen pending (not yet firing).
	pending map[string]bool
	// log lists what happened, for failure messages.
	log []string
}

func newTimeline(t *testing.T) *timeline {
	t.Helper()
	m := readMonitoring(t)
	tl := &timeline{
		t:  t,
		db: teststorage.New(t),
		engine: promql.NewEngine(promql.EngineOpts{
			Logger: slog.New(slog.DiscardHandler), MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute,
		}),
		now:         time.Now().Truncate(time.Second),
		series:      map[string][]labels.Labels{},
		lastSamples: map[string][]sample{},
		fired:       map[string][]labels.Labels{},
		pending:     map[string]bool{},
	}
	p := parser.NewParser(parser.Options{})
	for _, r := range m.rules {
		if r.Alert == "" {
			continue
		}
		expr, err := p.ParseExpr(r.Expr)
		if err != nil {
			t.Fatalf("alert %s: %v", r.Alert, err)
		}
		tl.alerts = append(tl.alerts, rules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), time.Duration(r.KeepFiringFor),
			labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "", true, slog.New(slog.DiscardHandler)))
	}
	if len(tl.alerts) == 0 {
		t.Fatal("config/monitoring has no alerting rule")
	}
	tl.start = tl.now
	t.Cleanup(func() {
		if testing.Verbose() {
			t.Logf("timeline:\n%s", strings.Join(tl.log, "\n"))
		}
	})
	return tl
}

// scrape scrapes each target once, for real, and records the result one
// scrape interval after the last record (or at the real time when that is
// later, so that timestamps the manager reports are never in the
// simulated future): its samples and up 1, or, when the scrape fails, up 0
// and stale markers for its earlier series.
func (tl *timeline) scrape(targets ...target) {
	tl.t.Helper()
	if !tl.lastRun.IsZero() {
		tl.now = tl.now.Add(scrapeInterval)
	}
	if now := time.Now(); now.After(tl.now) {
		tl.now = now
	}
	for _, tg := range targets {
		body, contentType, err := get(tl.t, tg)
		if err != nil {
			tl.logf("+%s: scrape of %s failed: %v", tl.now.Sub(tl.start).Round(time.Second), tg.instance, err)
			tl.append(tg.instance, nil, 0)
			continue
		}
		tl.append(tg.instance, parse(tl.t, body, contentType), 1)
	}
	tl.evaluate()
}

// hold repeats the last scrape of the targets every scrape interval for d
// of simulated time: the manager's metrics do not change meanwhile.
// Targets whose last scrape failed keep failing.
func (tl *timeline) hold(d time.Duration, targets ...target) {
	tl.t.Helper()
	tl.logf("+%s: hold %s", tl.now.Sub(tl.start).Round(time.Second), d)
	end := tl.now.Add(d)
	for tl.now.Add(scrapeInterval).Before(end) || tl.now.Add(scrapeInterval).Equal(end) {
		tl.now = tl.now.Add(scrapeInterval)
		for _, tg := range targets {
			up := 1.0
			if tl.series[tg.instance] == nil {
				up = 0
			}
			tl.append(tg.instance, tl.lastSamples[tg.instance], up)
		}
		tl.evaluate()
	}
}

// sample is one scraped sample.
type sample struct {
	labels labels.Labels
	value  float64
}

// append writes, for instance, the samples (nil: a failed scrape) and up
// at the current simulated time.
func (tl *timeline) append(instance string, samples []sample, up float64) {
	tl.t.Helper()
	app := tl.db.Appender(tl.t.Context())
	ts := tl.now.UnixMilli()
	target := labels.FromStrings("job", job, "instance", instance)
	add := func(l labels.Labels, v float64) {
		if _, err := app.Append(0, l, ts, v); err != nil {
			tl.t.Fatalf("appending %s at %s: %v", l, tl.now, err)
		}
	}
	add(labels.NewBuilder(target).Set(model.MetricNameLabel, "up").Labels(), up)
	if samples == nil {
		for _, l := range tl.series[instance] {
			add(l, math.Float64frombits(value.StaleNaN))
		}
		tl.series[instance] = nil
		tl.lastSamples[instance] = nil
	} else {
		var series []labels.Labels
		seen := map[string]bool{}
		for _, s := range samples {
			b := labels.NewBuilder(s.labels)
			target.Range(func(l labels.Label) { b.Set(l.Name, l.Value) })
			l := b.Labels()
			add(l, s.value)
			series = append(series, l)
			seen[l.String()] = true
		}
		// A series gone from the scrape is marked stale, as Prometheus's
		// scrape loop does.
		for _, l := range tl.series[instance] {
			if !seen[l.String()] {
				add(l, math.Float64frombits(value.StaleNaN))
			}
		}
		tl.series[instance] = series
		tl.lastSamples[instance] = samples
	}
	if err := app.Commit(); err != nil {
		tl.t.Fatal(err)
	}
}

// evaluate evaluates every alert at each evaluation time up to now, as the
// rule manager does, and records which fire.
func (tl *timeline) evaluate() {
	tl.t.Helper()
	if tl.lastRun.IsZero() {
		tl.lastRun = tl.now.Add(-evalInterval)
	}
	query := rules.EngineQueryFunc(tl.engine, tl.db)
	for ts := tl.lastRun.Add(evalInterval); !ts.After(tl.now); ts = ts.Add(evalInterval) {
		for _, a := range tl.alerts {
			if _, err := a.Eval(tl.t.Context(), 0, ts, query, &url.URL{}, 0); err != nil {
				tl.t.Fatalf("evaluating %s at %s: %v", a.Name(), ts, err)
			}
			for _, al := range a.ActiveAlerts() {
				switch al.State {
				case rules.StateFiring:
					if !slices.ContainsFunc(tl.fired[a.Name()], func(l labels.Labels) bool { return labels.Equal(l, al.Labels) }) {
						tl.logf("%s fires at +%s: %s", a.Name(), ts.Sub(tl.start).Round(time.Second), al.Labels)
					}
					tl.fired[a.Name()] = append(tl.fired[a.Name()], al.Labels)
				case rules.StatePending:
					tl.pending[a.Name()] = true
				}
			}
		}
		tl.lastRun = ts
	}
}

func (tl *timeline) logf(format string, args ...any) {
	tl.log = append(tl.log, fmt.Sprintf(format, args...))
}

// firing returns the labels of the alerts name fires now.
func (tl *timeline) firing(name string) []labels.Labels {
	for _, a := range tl.alerts {
		if a.Name() != name {
			continue
		}
		var out []labels.Labels
		for _, al := range a.ActiveAlerts() {
			if al.State == rules.StateFiring {
				out = append(out, al.Labels)
			}
		}
		return out
	}
	tl.t.Fatalf("no alert %s", name)
	return nil
}

// expectFiring fails unless name fires now, once, with the labels of want
// (besides alertname and those of the rule).
func (tl *timeline) expectFiring(name string, want map[string]string) {
	tl.t.Helper()
	got := tl.firing(name)
	if len(got) != 1 {
		tl.t.Fatalf("%s: %d firing, want 1: %v\n%s", name, len(got), got, strings.Join(tl.log, "\n"))
	}
	for k, v := range want {
		if got[0].Get(k) != v {
			tl.t.Errorf("%s fires with %s, want %s=%q", name, got[0], k, v)
		}
	}
}

// expectQuiet fails if any alert fired, or fires now.
func (tl *timeline) expectQuiet() {
	tl.t.Helper()
	if len(tl.fired) > 0 {
		tl.t.Fatalf("alerts fired: %v\n%s", slices.Sorted(maps.Keys(tl.fired)), strings.Join(tl.log, "\n"))
	}
}
