package aws_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/budget"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

// benchFactor compresses AWS time in the benchmarks: the double's clock and buckets and the
// client's budget all run this many times faster, so a 160 s floor takes 4 s. The snapshot
// start and size benchmarks use smaller factors: compressed 40 times, 300 CreateSnapshots or
// 50 req/s would make the two shared cores, not the budget, the bottleneck.
const (
	benchFactor = 40
	startFactor = 10
	sizeFactor  = 4
)

func benchLab(b *testing.B, o awsdouble.Options) *lab {
	if o.TimeFactor == 0 {
		o.TimeFactor = benchFactor
	}
	o.VolumeCreateDuration = time.Millisecond
	// The SDK's adaptive limiter runs on the wall clock and cannot be compressed: after one
	// throttle it would pace at 0.5 attempts per real second, 40 AWS seconds. Compressed
	// runs use the standard mode; the client budget does the pacing either way.
	lo := labOptions{double: o, limits: budget.ClientLimits().Scaled(o.TimeFactor), retry: "standard"}
	return newLab(b, lo)
}

// instances creates n instances with k data volumes each.
func instances(b *testing.B, l *lab, n, k int) []awsdouble.InstanceInfo {
	out := make([]awsdouble.InstanceInfo, n)
	for i := range out {
		var vs []awsdouble.VolumeSpec
		for j := range k {
			vs = append(vs, awsdouble.VolumeSpec{Device: fmt.Sprintf("/dev/xvd%c", 'b'+j), SizeGiB: 10})
		}
		out[i] = l.instance(b, awsdouble.InstanceSpec{Volumes: vs})
	}
	return out
}

// snapshotAll starts one CreateSnapshots per instance, all at once, and returns the ids.
func snapshotAll(ctx context.Context, b *testing.B, l *lab, ins []awsdouble.InstanceInfo) []string {
	reqs := make([]cloud.SnapshotRequest, len(ins))
	for i, in := range ins {
		reqs[i] = cloud.SnapshotRequest{InstanceID: in.ID, Tags: identity}
		for _, v := range in.Volumes {
			reqs[i].VolumeIDs = append(reqs[i].VolumeIDs, v.ID)
		}
	}
	sets, err := l.p.SnapshotInstances(ctx, reqs)
	if err != nil {
		b.Fatal(err)
	}
	var ids []string
	for _, set := range sets {
		for _, s := range set {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

func reportFloor(b *testing.B, l *lab, elapsed, floor time.Duration) {
	aws := time.Duration(float64(elapsed) * l.srv.Options().TimeFactor)
	b.ReportMetric(aws.Seconds(), "aws-s")
	b.ReportMetric(float64(aws)/float64(floor), "x-floor")
	st := l.srv.Stats()
	b.ReportMetric(float64(st.Errors["RequestLimitExceeded"]+st.Errors["RequestThrottledException"]), "throttled")
}

// BenchmarkAWS measures fedbr's cloud layer against the double with AWS's real limits, in
// compressed time, as ratios to the physical floors: run with -benchtime=1x.
func BenchmarkAWS(b *testing.B) {
	b.Run("SnapshotStart300", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			ctx := testContext(b)
			l := benchLab(b, awsdouble.Options{TimeFactor: startFactor})
			ins := instances(b, l, 300, 1)
			b.StartTimer()
			start := time.Now()
			ids := snapshotAll(ctx, b, l, ins)
			elapsed := time.Since(start)
			if len(ids) != 300 {
				b.Fatalf("%d snapshots", len(ids))
			}
			// Floor: 100 CreateSnapshots at once, then 5/s: (300 - 100) / 5 = 40 s.
			reportFloor(b, l, elapsed, 40*time.Second)
		}
	})
	b.Run("SizeThroughput", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			ctx := testContext(b)
			l := benchLab(b, awsdouble.Options{OmitFullSnapshotSize: true, TimeFactor: sizeFactor})
			ins := instances(b, l, 100, 2)
			first := snapshotAll(ctx, b, l, ins)
			second := snapshotAll(ctx, b, l, ins)
			if _, err := l.p.WaitSnapshots(ctx, append(first, second...), nil); err != nil {
				b.Fatal(err)
			}
			prev := map[string]string{}
			snaps, err := l.p.DescribeSnapshots(ctx, first)
			if err != nil {
				b.Fatal(err)
			}
			for _, s := range snaps {
				prev[s.VolumeID] = s.ID
			}
			cur, err := l.p.DescribeSnapshots(ctx, second)
			if err != nil {
				b.Fatal(err)
			}
			var reqs []cloud.SizeRequest
			for _, s := range cur {
				reqs = append(reqs, cloud.SizeRequest{SnapshotID: s.ID, PreviousID: prev[s.VolumeID]})
			}
			time.Sleep(time.Second) // let the EBS buckets refill to their burst
			before := l.srv.Stats()
			b.StartTimer()
			start := time.Now()
			if _, err := l.p.SnapshotSizes(ctx, reqs); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			after := l.srv.Stats()
			calls := after.Calls["ListSnapshotBlocks"] + after.Calls["ListChangedBlocks"] -
				before.Calls["ListSnapshotBlocks"] - before.Calls["ListChangedBlocks"]
			aws := elapsed.Seconds() * sizeFactor
			// Steady-state rate: the first 45 calls ride the client bucket's burst.
			b.ReportMetric(float64(calls), "ebs-calls")
			b.ReportMetric(100*(float64(calls)-45)/aws/50, "%-of-50rps")
			b.ReportMetric(float64(after.Errors["RequestThrottledException"]), "throttled")
		}
	})
	b.Run("Delete900", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			ctx := testContext(b)
			l := benchLab(b, awsdouble.Options{})
			ids := snapshotAll(ctx, b, l, instances(b, l, 300, 3))
			if _, err := l.p.WaitSnapshots(ctx, ids, nil); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			start := time.Now()
			if err := l.p.DeleteSnapshots(ctx, ids); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			// Floor: 100 DeleteSnapshot at once, then 5/s: (900 - 100) / 5 = 160 s.
			reportFloor(b, l, elapsed, 160*time.Second)
			if inv := l.srv.Inventory(identity); len(inv.Snapshots) != 0 {
				b.Fatalf("%d snapshots left", len(inv.Snapshots))
			}
		}
	})
}
