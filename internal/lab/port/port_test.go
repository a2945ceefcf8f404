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
