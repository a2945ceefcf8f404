package charts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/fedbr/fedbr/internal/testenv"
)

// ruleFile is the shape of a Prometheus rule file, as far as the tests read it.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert string `json:"alert"`
		} `json:"rules"`
	} `json:"groups"`
}

// TestRulesWithPromtool checks fedbr's alerting rules with promtool and runs their unit tests
// (testdata/rules-test.yaml), which must cover every alert. The negative control runs the same
// unit tests on the rules with the missed-window alert's old fixed 12 h threshold, which never
// fires for a schedule whose window closed minutes ago: they must fail, naming that alert.
func TestRulesWithPromtool(t *testing.T) {
	promtool := promtoolBinary(t)
	rules := filepath.Join(testenv.RepoRoot(), "charts", "fedbr-manager", "files", "prometheus-rules.yaml")
	tests, err := filepath.Abs(filepath.Join("testdata", "rules-test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := runPromtool(t, promtool, "check", "rules", rules); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if out, err := runPromtool(t, promtool, "test", "rules", tests); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}

	data, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(data, &rf); err != nil {
		t.Fatal(err)
	}
	testData, err := os.ReadFile(tests)
	if err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if !strings.Contains(string(testData), "alertname: "+r.Alert+"\n") {
				t.Errorf("alert %s has no unit test in testdata/rules-test.yaml", r.Alert)
			}
		}
	}
	if alerts < 6 {
		t.Fatalf("only %d alerts in %s", alerts, rules)
	}

	t.Run("negative control: a fixed 12 h window misses a closed one", func(t *testing.T) {
		// The whole file again, with that expression: every rule is kept as parsed (fedbr's
		// groups have a name and rules only).
		var doc struct {
			Groups []struct {
				Name  string           `json:"name"`
				Rules []map[string]any `json:"rules"`
			} `json:"groups"`
		}
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		changed := false
		for _, g := range doc.Groups {
			for _, r := range g.Rules {
				if r["alert"] == "FedbrScheduleNoRecentBackup" {
					r["expr"], changed = "time() - fedbr_volumebackupschedule_last_success_timestamp_seconds > 2 * 6 * 3600", true
				}
			}
		}
		if !changed {
			t.Fatal("no FedbrScheduleNoRecentBackup alert")
		}
		dir := t.TempDir()
		out, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		badRules := filepath.Join(dir, "rules.yaml")
		if err := os.WriteFile(badRules, out, 0o600); err != nil {
			t.Fatal(err)
		}
		badTests := filepath.Join(dir, "rules-test.yaml")
		rel := "../../../charts/fedbr-manager/files/prometheus-rules.yaml"
		if !bytes.Contains(testData, []byte(rel)) {
			t.Fatalf("testdata/rules-test.yaml does not load %s", rel)
		}
		if err := os.WriteFile(badTests, bytes.Replace(testData, []byte(rel), []byte(badRules), 1), 0o600); err != nil {
			t.Fatal(err)
		}
		res, err := runPromtool(t, promtool, "test", "rules", badTests)
		if err == nil || !strings.Contains(res, "alertname: FedbrScheduleNoRecentBackup") {
			t.Fatalf("promtool test rules passed the fixed window, or failed for another reason (err %v):\n%s", err, res)
		}
	})
}

// runPromtool runs promtool with args and returns its output.
func runPromtool(t *testing.T, promtool string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), promtool, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestAgentDownRule renders the agent chart's PrometheusRule and runs its alert through
// promtool: it fires once no scrape of this release's metrics Service has answered for the
// chart's `for` (the pod gone, or answering with errors), and not while one replica answers or
// for another release's Service. The chart refuses the rule without the ServiceMonitor it
// watches.
func TestAgentDownRule(t *testing.T) {
	promtool := promtoolBinary(t)
	objs := agent.template(t, map[string]any{"clusterName": "dp1", "metrics": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}}})
	var rule struct {
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	objs.get(t, "PrometheusRule", "fedbr-agent", &rule)
	dir := t.TempDir()
	data, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(dir, "agent-rules.yaml")
	if err := os.WriteFile(rules, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runPromtool(t, promtool, "check", "rules", rules); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	// The agent answers for 20 minutes, fails from 20m (up 0), is gone from 40m (no series);
	// another release's agent is down all along and is not this rule's.
	tests := `rule_files: [agent-rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: up{job="fedbr-agent-metrics",namespace="fedbr-system",service="fedbr-agent-metrics",pod="fedbr-agent-0"}
        values: 1x20 0x20
      - series: up{job="other-metrics",namespace="fedbr-system",service="other-metrics",pod="other-0"}
        values: 0x60
    alert_rule_test:
      - eval_time: 19m
        alertname: FedbrAgentDown
        exp_alerts: []
      - eval_time: 29m
        alertname: FedbrAgentDown
        exp_alerts: []
      - eval_time: 31m
        alertname: FedbrAgentDown
        exp_alerts:
          - exp_labels: {severity: critical}
            exp_annotations:
              summary: "no fedbr agent of fedbr-system/fedbr-agent has answered its metrics scrape for 10m: this data plane's backups and restores wait"
      - eval_time: 55m
        alertname: FedbrAgentDown
        exp_alerts:
          - exp_labels: {severity: critical}
            exp_annotations:
              summary: "no fedbr agent of fedbr-system/fedbr-agent has answered its metrics scrape for 10m: this data plane's backups and restores wait"
`
	testFile := filepath.Join(dir, "agent-rules-test.yaml")
	if err := os.WriteFile(testFile, []byte(tests), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runPromtool(t, promtool, "test", "rules", testFile); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}

	out, err := agent.run(t, map[string]any{"clusterName": "dp1", "metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true}}},
		"template", agent.release, agent.name)
	if err == nil || !strings.Contains(out, "metrics.prometheusRule.enabled needs metrics.enabled and metrics.serviceMonitor.enabled") {
		t.Errorf("rendered the rule without its ServiceMonitor (%v):\n%s", err, out)
	}
}
