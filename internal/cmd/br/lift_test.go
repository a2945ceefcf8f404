package br

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	pd "github.com/tikv/pd/client"
	pdhttp "github.com/tikv/pd/client/http"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/testenv"
	"github.com/fedbr/fedbr/internal/tidb"
)

// TestLiftUndoesWhatADeadPauseHolds is the agent's view of a pause that died holding: `br
// pause` records its identity in the member's pause entry; PD then holds that identity's service
// safepoint, paused schedulers and TTL'd config as a killed pause leaves them (placed again here
// after the pause ran, the in-process pause cannot be killed without its cleanup). `br lift
// --member` reads the identity off the member, lifts it, confirms PD holds nothing of it and
// reports Lifted with liftedAt and its result in its own entry "lift"; run again, it succeeds
// again.
func TestLiftUndoesWhatADeadPauseHolds(t *testing.T) {
	env := testenv.Start(t) // skips in -short mode
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := createMember(ctx, t, env, "b4", dpv1alpha1.BackupMemberInitialize)
	reportFlags := []string{"--member", m.Name, "--member-namespace", m.Namespace, "--kubeconfig", env.Kubeconfig}
	cl, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pc, err := pd.NewClientWithContext(ctx, []string{cl.PDAddr()}, pd.SecurityOption{})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	hc := pdhttp.NewClient("fedbr-test", []string{cl.PD.URL()})
	defer hc.Close()

	// Lifting needs an identity: without a pause entry there is none.
	if stderr, err := execute(ctx, append([]string{"lift", "--pd", cl.PDAddr()}, reportFlags...)...); err == nil ||
		!strings.Contains(err.Error(), "no pause entry with an identity") {
		t.Fatalf("lift without a pause entry = %v, want nothing to lift\n%s", err, stderr)
	}

	runCtx, stop := context.WithCancel(ctx)
	pauseDone := make(chan error, 1)
	go func() {
		_, err := execute(runCtx, append([]string{"pause", "--pd", cl.PDAddr(), "--ttl", "5m"}, reportFlags...)...)
		pauseDone <- err
	}()
	var ready dpv1alpha1.StepReport
	for ready.Phase != string(pause.PhaseReady) {
		select {
		case err := <-pauseDone:
			t.Fatalf("pause exited before Ready: %v", err)
		case <-ctx.Done():
			t.Fatalf("the member never said Ready: %+v", ready)
		case <-time.After(100 * time.Millisecond):
		}
		ready, _ = step(ctx, t, env, m, dpv1alpha1.StepPause)
	}
	if !dpv1alpha1.HasPauseIdentity(ready) || ready.ServiceSafePoint == "" || len(ready.PausedSchedulers) == 0 || len(ready.ScheduleConfig) == 0 {
		t.Fatalf("Ready entry %+v: want the pause's identity", ready)
	}
	stop()
	if err := <-pauseDone; err != nil {
		t.Fatal(err)
	}

	// What a killed pause leaves in PD, by its recorded identity.
	hold := tidb.Hold{ServiceSafePoint: ready.ServiceSafePoint, Schedulers: ready.PausedSchedulers}
	paused := map[string]any{}
	for _, c := range ready.ScheduleConfig {
		hold.Config = append(hold.Config, tidb.Setting{Key: c.Key, Original: c.Original, Paused: c.Paused})
		var v any
		if err := json.Unmarshal([]byte(c.Paused), &v); err != nil {
			t.Fatal(err)
		}
		paused[c.Key] = v
	}
	if _, err := pc.UpdateServiceGCSafePoint(ctx, ready.ServiceSafePoint, 300, ready.BackupTS-1); err != nil {
		t.Fatal(err)
	}
	for _, s := range ready.PausedSchedulers {
		if err := hc.SetSchedulerDelay(ctx, s, 300); err != nil {
			t.Fatal(err)
		}
	}
	if err := hc.SetConfig(ctx, paused, 300); err != nil {
		t.Fatal(err)
	}
	// PD's API shows no TTL'd config: the double's ground truth shows the paused values.
	if held, err := tidb.Plaintext.ReadHeldOf(ctx, cl.PD.URL(), hold, time.Now()); err != nil || !held.GC || len(held.Schedulers) == 0 ||
		len(tidb.HeldSettings(hold, cl.PD.EffectiveScheduleConfig())) == 0 {
		t.Fatalf("PD holds %+v (%v), want what the dead pause placed", held, err)
	}

	for attempt := 1; attempt <= 2; attempt++ {
		if stderr, err := execute(ctx, append([]string{"lift", "--pd", cl.PDAddr()}, reportFlags...)...); err != nil {
			t.Fatalf("lift %d: %v\n%s", attempt, err, stderr)
		}
		if held, err := tidb.Plaintext.ReadHeldOf(ctx, cl.PD.URL(), hold, time.Now()); err != nil || held.Any() {
			t.Fatalf("PD holds %s (%v) after lift %d", held, err, attempt)
		}
		if s := tidb.HeldSettings(hold, cl.PD.EffectiveScheduleConfig()); len(s) > 0 {
			t.Fatalf("config %v still in force after lift %d", s, attempt)
		}
		s, ok := step(ctx, t, env, m, dpv1alpha1.StepLift)
		var result pause.LiftStatus
		if !ok || s.Phase != string(pause.PhaseLifted) || s.LiftedAt == nil || s.ServiceSafePoint != ready.ServiceSafePoint ||
			len(s.PausedSchedulers) != len(ready.PausedSchedulers) || s.Result == nil || json.Unmarshal(s.Result.Raw, &result) != nil ||
			result.Phase != pause.PhaseLifted {
			t.Errorf("lift %d entry %+v: want Lifted with liftedAt, the identity and the result", attempt, s)
		}
	}
	got := &dpv1alpha1.VolumeBackupMember{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
		t.Fatal(err)
	}
	managers := map[string]bool{}
	for _, mf := range got.ManagedFields {
		managers[mf.Manager] = true
	}
	if !managers["fedbr-br-lift"] || !managers["fedbr-br-pause"] {
		t.Errorf("field managers %v, want fedbr-br-lift beside fedbr-br-pause", managers)
	}
	if p, _ := dpv1alpha1.Step(got.Status.Steps, dpv1alpha1.StepPause); p.ServiceSafePoint != ready.ServiceSafePoint {
		t.Errorf("the pause entry lost its identity: %+v", p)
	}
}
