package backoff

import (
	"testing"
	"time"
)

func TestDoubling(t *testing.T) {
	for _, tt := range []struct {
		first, ceiling time.Duration
		n              int
		want           time.Duration
	}{
		{250 * time.Millisecond, 15 * time.Second, 1, 250 * time.Millisecond},
		{250 * time.Millisecond, 15 * time.Second, 2, 500 * time.Millisecond},
		{250 * time.Millisecond, 15 * time.Second, 4, 2 * time.Second},
		{250 * time.Millisecond, 15 * time.Second, 30, 15 * time.Second},
		{250 * time.Millisecond, 15 * time.Second, 1000, 15 * time.Second}, // no overflow
		{500 * time.Millisecond, 5 * time.Second, 4, 4 * time.Second},
		{500 * time.Millisecond, 5 * time.Second, 5, 5 * time.Second},
		{50 * time.Millisecond, 10 * time.Millisecond, 1, 10 * time.Millisecond}, // ceiling below the first
		{50 * time.Millisecond, time.Second, 0, 50 * time.Millisecond},
	} {
		if got := Doubling(tt.first, tt.ceiling, tt.n); got != tt.want {
			t.Errorf("Doubling(%s, %s, %d) = %s, want %s", tt.first, tt.ceiling, tt.n, got, tt.want)
		}
	}
}
