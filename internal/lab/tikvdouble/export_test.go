package tikvdouble

import (
	"log/slog"
	"math/rand/v2"
)

// ReplayVolume rebuilds, from the volume in dir, the state store id would
// start with (without serving it) and returns its GC safe point and a
// reader of its MVCC data: what a crash image or a restored snapshot holds.
func ReplayVolume(dir string, id uint64) (uint64, func(key []byte, ts uint64) []byte, error) {
	w, err := openWAL(id, dir, "")
	if err != nil {
		return 0, nil, err
	}
	s := &Store{
		cfg: Config{StoreID: id}, log: slog.New(slog.DiscardHandler), rng: rand.New(rand.NewPCG(0, id)),
		peers: map[uint64]*peer{}, kv: newKVStore(), rd: &ready{}, created: map[uint64]bool{},
		mergeProposed: map[uint64]mergeProposal{}, destroyed: map[uint64]bool{},
	}
	if err := s.replay(w.recs); err != nil {
		return 0, nil, err
	}
	read := func(key []byte, ts uint64) []byte {
		v, _ := s.kv.read(encode(key), ts) // key is raw, as clients send it
		return v
	}
	return s.gc.done, read, nil
}
