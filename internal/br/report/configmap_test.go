package report_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/testenv"
)

type progress struct {
	Phase string `json:"phase"`
	Done  int    `json:"done"`
}

// TestConfigMapWriters runs two commands' reporters against a real API server: each owns its
// keys (by server-side apply, field manager fedbr-br-<command>), the agent's key survives, and a
// missing ConfigMap is created by the first write.
func TestConfigMapWriters(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	agentCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "backup-status", Namespace: "default"},
		Data: map[string]string{"agent": "mine"}}
	if err := env.Client.Create(ctx, agentCM); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, configMap string }{
		{"existing ConfigMap", "backup-status"},
		{"missing ConfigMap is created", "created-by-br"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := func(command string) *report.Reporter {
				sink, err := report.NewConfigMap(env.Config, "default", tc.configMap, command)
				if err != nil {
					t.Fatal(err)
				}
				r, err := report.New(report.Options{Command: command, Sink: sink, Log: t.Logf})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			pauseR, snapR := start("pause"), start("snapshot")
			// Interleaved writes: neither may drop the other's keys.
			pauseR.Update("Ready", progress{"Ready", 0})
			snapR.Update("Starting", progress{"Starting", 0})
			snapR.Update("Waiting", progress{"Waiting", 1})
			pauseR.Update("Stopped", progress{"Stopped", 0})
			if err := pauseR.Result(ctx, map[string]int{"stores": 3}); err != nil {
				t.Fatal(err)
			}
			snapR.Update("Completed", progress{"Completed", 2})
			if err := snapR.Result(ctx, map[string]string{"backupID": "b1"}); err != nil {
				t.Fatal(err)
			}

			var cm corev1.ConfigMap
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: tc.configMap}, &cm); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				"pause":           `{"phase":"Stopped","done":0}`,
				"pause.result":    `{"stores":3}`,
				"snapshot":        `{"phase":"Completed","done":2}`,
				"snapshot.result": `{"backupID":"b1"}`,
			}
			if tc.configMap == "backup-status" {
				want["agent"] = "mine"
			}
			if len(cm.Data) != len(want) {
				t.Errorf("keys = %v, want %v", cm.Data, want)
			}
			for k, v := range want {
				if cm.Data[k] != v {
					t.Errorf("%s = %s, want %s", k, cm.Data[k], v)
				}
			}
			managers := map[string]bool{}
			for _, m := range cm.ManagedFields {
				managers[m.Manager] = true
			}
			if !managers["fedbr-br-pause"] || !managers["fedbr-br-snapshot"] {
				t.Errorf("field managers %v, want fedbr-br-pause and fedbr-br-snapshot", managers)
			}
		})
	}
}
