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
