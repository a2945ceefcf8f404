package recovery

// metaChunkBits sizes Metas' chunks: 1<<16 metas, 7 MiB each.
const metaChunkBits = 16

// Metas holds region metas in chunks of a fixed size. A million regions report three million
// metas, from a hundred stores at once: one flat slice grown by append is copied every time it
// grows, the old copy live until the copy ends, and holds up to a quarter more than it uses;
// chunks never move (issue 44). The zero value is empty and ready to use.
type Metas struct {
	chunks [][]RegionMeta
	n      int
}

// NewMetas returns ms as Metas.
func NewMetas(ms ...RegionMeta) *Metas {
	m := &Metas{}
	m.Append(ms...)
	return m
}

// Append adds ms after the metas already held.
func (m *Metas) Append(ms ...RegionMeta) {
	for len(ms) > 0 {
		if m.n == len(m.chunks)<<metaChunkBits {
			m.chunks = append(m.chunks, make([]RegionMeta, 0, 1<<metaChunkBits))
		}
		last := &m.chunks[len(m.chunks)-1]
		k := copy((*last)[len(*last):cap(*last)], ms)
		*last = (*last)[:len(*last)+k]
		m.n += k
		ms = ms[k:]
	}
}

// Len is how many metas are held; a nil Metas holds none.
func (m *Metas) Len() int {
	if m == nil {
		return 0
	}
	return m.n
}

// At is the i-th meta, in the order they were appended.
func (m *Metas) At(i int) *RegionMeta {
	return &m.chunks[i>>metaChunkBits][i&(1<<metaChunkBits-1)]
}

// Keep drops, in place, the metas keep says no to; the others keep their order.
func (m *Metas) Keep(keep func(*RegionMeta) bool) {
	n := 0
	for i := range m.n {
		if keep(m.At(i)) {
			*m.At(n) = *m.At(i)
			n++
		}
	}
	for c := range m.chunks {
		from := min(max(n-c<<metaChunkBits, 0), 1<<metaChunkBits)
		clear(m.chunks[c][from:len(m.chunks[c])]) // no key stays reachable from a dropped meta
		m.chunks[c] = m.chunks[c][:from]
	}
	m.chunks = m.chunks[:(n+1<<metaChunkBits-1)>>metaChunkBits]
	m.n = n
}
