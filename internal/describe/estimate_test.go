package describe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
)

func obsAt(pairs ...float64) []Observation {
	var out []Observation
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, Observation{At: t0.Add(time.Duration(pairs[i] * float64(time.Second))), Percent: pairs[i+1]})
	}
	return out
}

func TestEstimate(t *testing.T) {
	for _, c := range []struct {
		name string
		obs  []Observation
		want string
	}{
		{"no observation", nil, "estimating"},
		{"one observation", obsAt(0, 40), "estimating"},
		{"two: 10 % in 60 s, 50 % left: 5 min", obsAt(0, 40, 60, 50), "about 5m0s left"},
		{"the rate is the oldest to the newest kept", obsAt(0, 10, 30, 40, 60, 55), "about 1m0s left"},
		{"no progress between them", obsAt(0, 20, 90, 20), "estimating: no progress in 1m30s"},
		{"same instant", obsAt(5, 20, 5, 30), "estimating"},
		{"complete: nothing left", obsAt(0, 90, 10, 100), ""},
		{"slow: hours", obsAt(0, 1, 3600, 2), "about 98h0m0s left"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Estimate(c.obs); got != c.want {
				t.Errorf("Estimate = %q, want %q", got, c.want)
			}
		})
	}
}

func snapshotView(phase string, percent float64, since time.Time) *View {
	return &View{Kind: "VolumeBackup", Namespace: "default", Name: "nightly", Members: []Member{{Plane: "dp1", Namespace: "tidb", Name: "fed-nightly",
		Steps: []dpv1alpha1.StepReport{{Name: "snapshot", Phase: phase, Done: 1, Total: 4, Percent: percent, Since: micro(since)},
			{Name: "pause", Phase: "Ready"}}}}}
}

func TestObserver(t *testing.T) {
	var o Observer
	o.Window = 5 * time.Minute
	since := t0.Add(-time.Hour)
	read := func(at time.Duration, phase string, percent float64, since time.Time) []Observation {
		v := snapshotView(phase, percent, since)
		o.Observe(v, t0.Add(at))
		if _, ok := v.Members[0].Observed["pause"]; ok {
			t.Errorf("the pause step is observed")
		}
		return v.Members[0].Observed["snapshot"]
	}
	if got := read(0, "Waiting", 10, since); len(got) != 1 {
		t.Fatalf("first read: %v, want one observation", got)
	}
	if got := read(time.Minute, "Waiting", 20, since); Estimate(got) != "about 8m0s left" {
		t.Errorf("second read: %v (%s)", got, Estimate(got))
	}
	// Older than the window: the oldest goes, the rate is the recent one (20 → 30 % in 5 min).
	if got := read(6*time.Minute, "Waiting", 30, since); len(got) != 2 || got[0].Percent != 20 || Estimate(got) != "about 35m0s left" {
		t.Errorf("after the window: %v (%s)", got, Estimate(got))
	}
	// A retried step (another Since) starts again.
	if got := read(7*time.Minute, "Waiting", 5, t0); len(got) != 1 || Estimate(got) != "estimating" {
		t.Errorf("retried: %v", got)
	}
	// So does a percent that goes back, and a new phase.
	if got := read(8*time.Minute, "Waiting", 4, t0); len(got) != 1 {
		t.Errorf("percent went back: %v", got)
	}
	if got := read(9*time.Minute, "Completed", 100, t0); len(got) != 1 {
		t.Errorf("new phase: %v", got)
	}
}

func TestSnapshotProgress(t *testing.T) {
	for _, c := range []struct {
		name string
		s    dpv1alpha1.StepReport
		obs  []Observation
		want string
	}{
		{"waiting, one read", dpv1alpha1.StepReport{Name: "snapshot", Phase: "Waiting", Done: 1, Total: 4, Percent: 37.5}, obsAt(0, 37.5),
			"1/4 snapshots completed, 37.5%, estimating"},
		{"waiting, two reads", dpv1alpha1.StepReport{Name: "snapshot", Phase: "Waiting", Done: 2, Total: 4, Percent: 60}, obsAt(0, 50, 30, 60),
			"2/4 snapshots completed, 60.0%, about 2m0s left"},
		{"starting: no percent yet, no estimate", dpv1alpha1.StepReport{Name: "snapshot", Phase: "Starting", Total: 4}, nil,
			"0/4 snapshots completed, 0.0%"},
		{"completed", dpv1alpha1.StepReport{Name: "snapshot", Phase: "Completed", Done: 4, Total: 4, Percent: 100}, obsAt(0, 100),
			"4/4 snapshots completed, 100.0%"},
		{"no total yet", dpv1alpha1.StepReport{Name: "snapshot", Phase: "Armed"}, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Progress(c.s, c.obs, t0); got != c.want {
				t.Errorf("Progress = %q, want %q", got, c.want)
			}
		})
	}
}

// TestWatch drives a watch through reads given in order: the view is drawn when it changed,
// a read error is noted once and the watch goes on, and it stops at a final phase.
func TestWatch(t *testing.T) {
	since := t0.Add(-time.Minute)
	complete := snapshotView("Completed", 100, since)
	complete.Phase, complete.Final = "Complete", true
	reads := []struct {
		v   *View
		err error
	}{
		{snapshotView("Waiting", 10, since), nil},
		{snapshotView("Waiting", 10, since), nil}, // unchanged: not drawn
		{nil, errors.New("connection refused")},
		{nil, errors.New("connection refused")}, // noted once
		{snapshotView("Waiting", 30, since), nil},
		{complete, nil},
		{snapshotView("Waiting", 50, since), nil}, // never read: the watch ended
	}
	var out strings.Builder
	i := 0
	clock := t0
	w := &Watch{
		Gather: func(context.Context) (*View, error) { r := reads[i]; i++; return r.v, r.err },
		Draw: func(v *View, now time.Time) error {
			fmt.Fprintf(&out, "draw at %s:\n", now.Sub(t0))
			return Render(&out, v, now)
		},
		Note: func(s string) { fmt.Fprintf(&out, "note: %s\n", s) },
		Next: func(context.Context) bool { clock = clock.Add(30 * time.Second); return true },
		Now:  func() time.Time { return clock },
	}
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if i != 6 {
		t.Errorf("%d reads, want 6 (the watch stops at Complete)", i)
	}
	got := out.String()
	for _, want := range []string{
		"draw at 0s:\n",
		"snapshot: Waiting for 1m0s, 1/4 snapshots completed, 10.0%, estimating\n",
		"note: reading again failed (retrying): connection refused\n",
		// 10 % at 0 s, 30 % at 120 s: 70 % left at 10 % a minute.
		"draw at 2m0s:\n",
		"snapshot: Waiting for 3m0s, 1/4 snapshots completed, 30.0%, about 7m0s left\n",
		"draw at 2m30s:\n",
		"snapshot: Completed for 3m30s, 1/4 snapshots completed, 100.0%\n",
		"note: VolumeBackup default/nightly reached Complete.\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("watch output lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "draw at"); n != 3 {
		t.Errorf("%d draws, want 3 (an unchanged view is not drawn again):\n%s", n, got)
	}
	if n := strings.Count(got, "connection refused"); n != 1 {
		t.Errorf("the same error noted %d times, want once:\n%s", n, got)
	}
}

func TestWatchEnds(t *testing.T) {
	first := snapshotView("Waiting", 10, t0)
	t.Run("the first read's error is returned", func(t *testing.T) {
		w := &Watch{Gather: func(context.Context) (*View, error) { return nil, ErrNotFound },
			Draw: func(*View, time.Time) error { t.Error("drawn"); return nil }, Note: func(string) {},
			Next: func(context.Context) bool { return true }, Now: func() time.Time { return t0 }}
		if err := w.Run(context.Background()); !errors.Is(err, ErrNotFound) {
			t.Errorf("Run = %v, want ErrNotFound", err)
		}
	})
	t.Run("deleted while watched", func(t *testing.T) {
		n := 0
		var notes []string
		w := &Watch{Gather: func(context.Context) (*View, error) {
			n++
			if n == 1 {
				return first, nil
			}
			return nil, fmt.Errorf("VolumeBackup default/nightly: %w", ErrNotFound)
		},
			Draw: func(*View, time.Time) error { return nil }, Note: func(s string) { notes = append(notes, s) },
			Next: func(context.Context) bool { return true }, Now: func() time.Time { return t0 }}
		if err := w.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(notes) != 1 || notes[0] != "VolumeBackup default/nightly is gone (deleted)." {
			t.Errorf("notes %q", notes)
		}
	})
	t.Run("ends when Next says so (Ctrl-C)", func(t *testing.T) {
		n := 0
		w := &Watch{Gather: func(context.Context) (*View, error) { n++; return first, nil },
			Draw: func(*View, time.Time) error { return nil }, Note: func(string) {},
			Next: func(context.Context) bool { return n < 3 }, Now: func() time.Time { return t0 }}
		if err := w.Run(context.Background()); err != nil || n != 3 {
			t.Errorf("Run = %v after %d reads, want nil after 3", err, n)
		}
	})
}
