package budget

import (
	"context"
	"sync"
	"testing"
	"time"
)

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time                         { return c.now }
func (c *fakeClock) After(d time.Duration) <-chan time.Time { return time.After(0) }

func TestBucketTake(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		at   time.Duration // since t0
		want time.Duration
	}
	for _, tc := range []struct {
		name  string
		rate  Rate
		steps []step
	}{
		{"burst is free", Rate{Burst: 3, PerSecond: 1}, []step{{0, 0}, {0, 0}, {0, 0}}},
		{"after burst waits one refill each", Rate{Burst: 2, PerSecond: 5}, []step{{0, 0}, {0, 0}, {0, 200 * time.Millisecond}, {0, 400 * time.Millisecond}}},
		{"refill over time", Rate{Burst: 1, PerSecond: 5}, []step{{0, 0}, {200 * time.Millisecond, 0}, {300 * time.Millisecond, 100 * time.Millisecond}}},
		{"refill capped at burst", Rate{Burst: 2, PerSecond: 10}, []step{{0, 0}, {0, 0}, {time.Hour, 0}, {time.Hour, 0}, {time.Hour, 100 * time.Millisecond}}},
		{"zero rate is unlimited", Rate{}, []step{{0, 0}, {0, 0}, {0, 0}}},
		{"ec2 mutating: 300 calls need 40s", Rate{Burst: 100, PerSecond: 5}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeClock{now: t0}
			b := NewBucket(tc.rate, c)
			if tc.steps == nil {
				var last time.Duration
				for range 300 {
					last = b.take(t0)
				}
				if last != 40*time.Second {
					t.Fatalf("300th call waits %v, want 40s", last)
				}
				return
			}
			for i, s := range tc.steps {
				if got := b.take(t0.Add(s.at)); got != s.want {
					t.Fatalf("step %d: wait %v, want %v", i, got, s.want)
				}
			}
		})
	}
}

func TestBucketWaitCancelGivesTokenBack(t *testing.T) {
	b := NewBucket(Rate{Burst: 1, PerSecond: 0.001}, nil)
	if err := b.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := b.Wait(ctx); err == nil {
		t.Fatal("Wait succeeded on an empty bucket")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens < -0.01 {
		t.Fatalf("tokens = %v after a cancelled wait, want about 0", b.tokens)
	}
}

func TestClass(t *testing.T) {
	l := DefaultLimits()
	for action, want := range map[string]string{
		"CreateSnapshots":            "CreateSnapshots",
		"DeleteSnapshot":             "DeleteSnapshot",
		"DescribeSnapshots":          "describe",
		"GetEbsEncryptionByDefault":  "describe",
		"EnableFastSnapshotRestores": "mutating",
		"AttachVolume":               "mutating",
	} {
		if got := l.Class(action); got != want {
			t.Errorf("Class(%s) = %s, want %s", action, got, want)
		}
	}
}

func TestScaled(t *testing.T) {
	l := DefaultLimits().Scaled(10)
	if got := l.EC2Actions["CreateSnapshots"]; got != (Rate{Burst: 100, PerSecond: 50}) {
		t.Fatalf("scaled CreateSnapshots = %+v", got)
	}
	if DefaultLimits().EC2Actions["CreateSnapshots"].PerSecond != 5 {
		t.Fatal("Scaled changed the original")
	}
}

func TestPendingQueue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := NewPending(4, nil)
	p.SetPollInterval(time.Millisecond)

	var mu sync.Mutex
	finished := map[string]bool{}
	refresh := func(_ context.Context, ids []string) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		var done []string
		for _, id := range ids {
			if finished[id] {
				done = append(done, id)
			}
		}
		return done, nil
	}
	if err := p.Reserve(ctx, 3, refresh); err != nil {
		t.Fatal(err)
	}
	p.Commit(3, "a", "b", "c")
	if err := p.Reserve(ctx, 5, refresh); err == nil {
		t.Fatal("reserving more than the limit succeeded")
	}
	got := make(chan error, 1)
	go func() { got <- p.Reserve(ctx, 2, refresh) }()
	select {
	case err := <-got:
		t.Fatalf("reserve returned %v while the queue was full", err)
	case <-time.After(20 * time.Millisecond):
	}
	mu.Lock()
	finished["b"] = true
	mu.Unlock()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if n := p.Len(); n != 4 {
		t.Fatalf("Len = %d, want 4", n)
	}
	p.Cancel(2)
	if n := p.Len(); n != 2 {
		t.Fatalf("Len = %d after cancel, want 2", n)
	}
}

func TestPendingReserveHonoursContext(t *testing.T) {
	p := NewPending(1, nil)
	p.Commit(0, "x")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := p.Reserve(ctx, 1, nil); err == nil {
		t.Fatal("Reserve succeeded on a full queue")
	}
}

func TestRegistrySharesBudget(t *testing.T) {
	var r Registry
	a := r.Get("acct/us-west-2", DefaultLimits(), nil)
	b := r.Get("acct/us-west-2", Limits{}, nil)
	c := r.Get("acct/eu-west-1", DefaultLimits(), nil)
	if a != b || a == c {
		t.Fatal("registry did not share by key")
	}
}

func TestWithHeadroom(t *testing.T) {
	l := DefaultLimits().WithHeadroom(5)
	if got := l.EC2Actions["CreateSnapshots"]; got.Burst != 95 || got.PerSecond != 5 {
		t.Fatalf("CreateSnapshots = %+v", got)
	}
	if l.EBSDirect.Burst != 45 || DefaultLimits().EBSDirect.Burst != 50 {
		t.Fatal("headroom not applied to a copy")
	}
	if got := (Limits{EC2Describe: Rate{Burst: 3}}).WithHeadroom(5).EC2Describe.Burst; got != 1 {
		t.Fatalf("burst floor = %v, want 1", got)
	}
}
