package labtest

import (
	"fmt"
	"slices"
	"testing"
)

func TestSliceOf(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f", "g"}
	for _, c := range []struct {
		seed uint64
		n    int
		want []string
	}{
		{0, 2, []string{"a", "b"}},
		{1, 2, []string{"c", "d"}},
		{3, 2, []string{"g", "a"}}, // wraps round
		{4, 2, []string{"b", "c"}},
		{5, 3, []string{"b", "c", "d"}}, // 15 mod 7
		{9, 1, []string{"c"}},
		{2, 0, []string{"c"}}, // at least one
		{2, 7, names},
		{2, 9, names},
	} {
		if got := SliceOf(c.seed, names, c.n); !slices.Equal(got, c.want) {
			t.Errorf("SliceOf(%d, %d) = %v, want %v", c.seed, c.n, got, c.want)
		}
	}
}

// TestSliceCoversEverything: any ceil(len/n) consecutive seeds take every part, whatever the
// first seed, so that every scenario runs in CI over that many days.
func TestSliceCoversEverything(t *testing.T) {
	for l := 1; l <= 21; l++ {
		names := make([]string, l)
		for i := range names {
			names[i] = fmt.Sprint(i)
		}
		for n := 1; n <= l; n++ {
			runs := (l + n - 1) / n
			for first := uint64(0); first < 50; first++ {
				seen := map[string]bool{}
				for s := first; s < first+uint64(runs); s++ {
					for _, x := range SliceOf(s, names, n) {
						seen[x] = true
					}
				}
				if len(seen) != l {
					t.Fatalf("%d parts, %d a run: seeds %d..%d took %d parts", l, n, first, first+uint64(runs)-1, len(seen))
				}
			}
		}
	}
}

func TestSelected(t *testing.T) {
	for _, c := range []struct {
		name, sel string
		want      bool
	}{
		{"pause-deleted", "pause", true},
		{"pause-deleted", "schedule,deleted", true},
		{"pause-deleted", "schedule", false},
		{"pause-deleted", "", false},
		{"pause-deleted", ",", false},
	} {
		if got := Selected(c.name, c.sel); got != c.want {
			t.Errorf("Selected(%q, %q) = %v, want %v", c.name, c.sel, got, c.want)
		}
	}
}
