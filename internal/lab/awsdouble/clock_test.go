package awsdouble

import (
	"testing"
	"time"
)

// TestClockFollowsTheHostsWallClock: the double's clock is the host's wall clock (which PD and
// the steps read), so a step of the host's clock moves it too: a snapshot's startTime stays
// comparable with a backup ts. Advance moves it ahead; a restart never moves it back, and a
// restart after downtime does not leave it behind the wall clock.
func TestClockFollowsTheHostsWallClock(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var step time.Duration // how far the host's wall clock was stepped
	s.wall = func() time.Time { return s.begun.Round(0).Add(time.Since(s.begun) + step) }
	host := func() time.Time { return time.Now().Add(step) }
	near := func(what string, got, want time.Time) {
		t.Helper()
		if d := got.Sub(want); d < -time.Second || d > time.Second {
			t.Errorf("%s: the double's clock reads %s, want %s (off by %s)", what, got, want, d)
		}
	}
	near("at the start", s.Now(), host())
	step = 10 * time.Second
	near("after the host's clock stepped 10s forward", s.Now(), host())
	step = -10 * time.Second
	near("after the host's clock stepped 10s back", s.Now(), host())
	step = 10 * time.Second
	s.Advance(time.Hour)
	near("advanced 1h", s.Now(), host().Add(time.Hour))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A restart: the saved clock is an hour ahead of the wall clock, and stays so.
	r, err := Open(s.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	near("restarted ahead", r.Now(), s.st.VirtualNow)
	// It closes with its clock an hour behind the wall clock, as a double stopped an hour
	// ago would have saved it.
	r.ahead = -time.Hour
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	// Restarted after that downtime, it reads the wall clock: AWS's clock kept running.
	behind, err := Open(s.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = behind.Close() }()
	near("restarted after downtime", behind.Now(), time.Now())
}
