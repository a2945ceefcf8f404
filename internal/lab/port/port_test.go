package port

import (
	"sync"
	"testing"
)

func TestFreeNeverHandsOutAPortTwice(t *testing.T) {
	var (
		mu   sync.Mutex
		seen = map[int]bool{}
		wg   sync.WaitGroup
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				ps, err := Free(3)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, p := range ps {
					if seen[p] {
						t.Errorf("port %d handed out twice", p)
					}
					seen[p] = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 8*20*3 {
		t.Fatalf("%d distinct ports, want %d", len(seen), 8*20*3)
	}
}

// A port from the ephemeral range can be taken by any outgoing connection between Free and the
// component's bind; a port below it cannot.
func TestFreeStaysBelowTheEphemeralRange(t *testing.T) {
	top := ephemeralStart()
	ps, err := Free(50)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p < lowest || p >= top {
			t.Errorf("port %d outside [%d, %d)", p, lowest, top)
		}
	}
}

// A block's ports are all below the ephemeral range and never handed out again, by Block or Free.
func TestBlock(t *testing.T) {
	top := ephemeralStart()
	base, err := Block(0, 100, 101, 102)
	if err != nil {
		t.Fatal(err)
	}
	if base < lowest || base+102 >= top {
		t.Fatalf("block at %d: outside [%d, %d)", base, lowest, top)
	}
	mu.Lock()
	for _, o := range []int{0, 100, 101, 102} {
		if !handed[base+o] {
			t.Errorf("port %d of the block not remembered", base+o)
		}
	}
	mu.Unlock()
	if _, err := Block(-1); err == nil {
		t.Error("a negative offset was accepted")
	}
	if _, err := Block(0, top); err == nil {
		t.Error("a block wider than the range was accepted")
	}
}
