package apply

import (
	"errors"
	"sync/atomic"
	"testing"
)

func TestRun(t *testing.T) {
	group := ByKind(func(s string) string { return s }, []string{"pv"}, []string{"pvc"})
	for _, tc := range []struct {
		as   []string
		want int
	}{
		{nil, 0},
		{[]string{"pv", "pv", "pvc", "pv"}, 2},
		{[]string{"pvc", "pv"}, 1},
		{[]string{"other", "pv", "pv"}, 0},
	} {
		if got := Run(tc.as, group); got != tc.want {
			t.Errorf("Run(%v) = %d, want %d", tc.as, got, tc.want)
		}
	}
}

func TestConcurrentlyAppliesEveryOneAndReportsAFailure(t *testing.T) {
	var applied atomic.Int32
	boom := errors.New("boom")
	err := Concurrently([]int{1, 2, 3}, func(i int) error {
		applied.Add(1)
		if i == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || applied.Load() != 3 {
		t.Fatalf("err %v, %d applied; want boom and all 3 applied", err, applied.Load())
	}
}
