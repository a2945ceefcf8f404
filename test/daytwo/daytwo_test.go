// Package daytwo runs the day-2 paths of issue 18 end to end in one lab, through the same code
// the demo runs (internal/lab/demo): a schedule over three ticks with retention, every step pod
// carrying the schedule's label and IAM-role annotation, a restore refused over a taken claim
// and one restored exactly into another namespace and TidbCluster name; a pause that ends (pod
// deleted, or SIGKILLed) before the snapshots start fails its backup, and a killed pause's hold
// is lifted before its TTL; a backup deleted with its CreateSnapshots calls in flight leaves
// nothing under either clean policy; a backup failed by one snapshot after the others completed
// still reports the size of what its failed member had snapshotted; another tenant, in
// namespaces of its own, is refused the backup by its storage prefix and by a copy of its
// metadata under the tenant's own prefix, before any volume, and the backup then restores
// exactly. After every scenario the
// source holds no pause and the AWS double holds nothing the scenario made. The TiDB clusters run
// with TLS (spec.tlsCluster), so every day-2 path dials PD and TiKV as a TLS cluster needs; the
// demo and the crash suite run them in plaintext. fedbr is installed through its charts
// (demo.Options.Install) as in `make demo`: the agents' day-2 flags reach them through the
// chart's extraArgs.
package daytwo

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/lab/demo"
	"github.com/fedbr/fedbr/internal/lab/labtest"
)

// ciScenarios is how many scenarios a `make test` run takes (labtest.Slice).
const ciScenarios = 2

// TestDayTwo runs the slice of the scenarios the seed picks (labtest.Slice; every scenario with
// FEDBR_LONG=1, as `make test-long` sets); FEDBR_DAYTWO=<substring>[,<substring>…] runs those
// whose names contain one of them instead.
func TestDayTwo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a lab")
	}
	var names []string
	if sel := os.Getenv("FEDBR_DAYTWO"); sel != "" {
		for _, n := range DayTwoScenarios {
			if labtest.Selected(n, sel) {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			t.Fatalf("FEDBR_DAYTWO=%q names no scenario of %q", sel, DayTwoScenarios)
		}
	} else {
		names = labtest.Slice(t, "test/daytwo", DayTwoScenarios, ciScenarios)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	l := labtest.Up(ctx, t)
	results, err := RunDayTwo(ctx, demo.Options{Lab: l, Timeout: 4 * time.Minute, Out: labtest.Log{T: t}, TLS: true, Install: true}, names)
	if err != nil {
		t.Fatal(err)
	}
	want := names
	for _, r := range results {
		t.Logf("%s: %s (%s)", r.Scenario, r.Outcome, r.Took.Round(time.Second))
		if r.Err != nil {
			t.Errorf("%s: %v", r.Scenario, r.Err)
		}
	}
	if len(results) != len(want) {
		t.Errorf("%d of %d scenarios ran", len(results), len(want))
	}
}
