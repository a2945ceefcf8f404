package aws

import (
	"slices"
	"testing"
	"time"
)

func TestPollerStartsShortAndDoublesToTheInterval(t *testing.T) {
	for _, tt := range []struct {
		interval time.Duration
		want     []time.Duration
	}{
		{5 * time.Second, []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}},
		{10 * time.Millisecond, []time.Duration{10 * time.Millisecond, 10 * time.Millisecond}},
	} {
		w := (&Provider{cfg: Config{PollInterval: tt.interval}}).poller()
		var got []time.Duration
		for range tt.want {
			got = append(got, w.interval())
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("interval %s: polls after %v, want %v", tt.interval, got, tt.want)
		}
	}
}
