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
