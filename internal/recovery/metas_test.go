package recovery

import (
	"testing"
)

// TestMetas: metas appended in batches of any size, across chunk boundaries, read back in
// order; Keep drops some in place and the rest keep their order, across chunks too.
func TestMetas(t *testing.T) {
	const n = 2<<metaChunkBits + 100
	m := &Metas{}
	for i := 0; i < n; {
		size := min(1+i%3000, n-i)
		batch := make([]RegionMeta, size)
		for j := range batch {
			batch[j] = RegionMeta{RegionID: uint64(i + j + 1), StoreID: uint64((i + j) % 5)}
		}
		m.Append(batch...)
		i += size
	}
	if m.Len() != n {
		t.Fatalf("Len %d, want %d", m.Len(), n)
	}
	for i := range n {
		if got := m.At(i).RegionID; got != uint64(i+1) {
			t.Fatalf("At(%d) is region %d, want %d", i, got, i+1)
		}
	}
	m.Keep(func(r *RegionMeta) bool { return r.StoreID != 3 })
	want := 0
	for i := range n {
		if i%5 != 3 {
			if got := m.At(want).RegionID; got != uint64(i+1) {
				t.Fatalf("after Keep, At(%d) is region %d, want %d", want, got, i+1)
			}
			want++
		}
	}
	if m.Len() != want {
		t.Fatalf("after Keep, Len %d, want %d", m.Len(), want)
	}
	m.Append(RegionMeta{RegionID: 7})
	if got := m.At(want).RegionID; got != 7 || m.Len() != want+1 {
		t.Errorf("appended after Keep: At(%d) = %d, Len %d", want, got, m.Len())
	}
	m.Keep(func(*RegionMeta) bool { return false })
	if m.Len() != 0 || len(m.chunks) != 0 {
		t.Errorf("everything dropped: Len %d, %d chunks", m.Len(), len(m.chunks))
	}
	if NewMetas().Len() != 0 || (*Metas)(nil).Len() != 0 {
		t.Error("empty Metas not empty")
	}
}
