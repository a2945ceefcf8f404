package tikvdouble

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pingcap/kvproto/pkg/metapb"

	"github.com/fedbr/fedbr/internal/lab/volumelock"
)

// The store keeps its state in two files, as TiKV keeps a RocksDB checkpoint (SST files, on the
// data volume) and the logs since (raft-engine and RocksDB's WAL, on the raft volume when
// raft-engine.dir and rocksdb.wal-dir point there):
//
//   - ckptFile, on the data volume: the whole state as of the last compaction, written as a
//     new file and renamed into place, never appended to.
//   - logFile, on the raft volume (the data volume when there is no raft volume): every record
//     since that compaction, appended and fsynced.
//
// Both files are sequences of frames [len u32][crc32c u32][payload], payload = one JSON record,
// and both start with a "gen" record naming the store and the compaction generation. A
// compaction writes checkpoint generation G+1, then replaces the log with an empty one of
// generation G+1; a crash between the two leaves a log of generation G whose records the
// checkpoint already holds. Any other pair of generations means the two volumes are not from
// one moment (snapshotted apart, or one of them restored from another backup), and the store
// refuses to start, as TiKV does when its raft and kv engines disagree.
const (
	ckptFile = "kv.ckpt"
	logFile  = "raft.log"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// record is one persisted fact. Replaying the records in file order rebuilds
// the store exactly: log entries, hard states, region metas, and apply marks
// whose replay re-executes the committed entries up to that index.
type record struct {
	// Kind: "gen" (first record of each file), "ident" (the store's cluster id), "entries", "hard", "region", "apply", "kv", "resolve",
	// "tombstone" (the peer was destroyed: merged away or removed),
	// "clear" (the MVCC data in [Start, End) was dropped),
	// "gc" (the MVCC data was garbage-collected at TS).
	Kind   string `json:"k"`
	Region uint64 `json:"r,omitempty"`

	// entries: appended at Entries[0].Index, truncating any later ones.
	Entries []entry `json:"e,omitempty"`
	// hard: raft hard state.
	Term   uint64 `json:"t,omitempty"`
	Vote   uint64 `json:"v,omitempty"`
	Commit uint64 `json:"c,omitempty"`
	// region: the peer's region meta, and with FirstIndex > 0 also its log
	// base, applied index and hard state (Term, Vote, Commit).
	Meta       *metapb.Region `json:"m,omitempty"`
	FirstIndex uint64         `json:"fi,omitempty"`
	// Merge is the peer's pending merge (PrepareMerge applied), if any.
	Merge    *mergeState `json:"mg,omitempty"`
	SnapTerm uint64      `json:"st,omitempty"`
	// apply: entries up to Applied were executed.
	Applied uint64 `json:"a,omitempty"`
	// kv: one key's whole MVCC state (written by compaction). Bytes, never a
	// JSON string: encoded keys are not UTF-8.
	Key   []byte   `json:"key,omitempty"`
	Value *mvccKey `json:"val,omitempty"`
	TS    uint64   `json:"ts,omitempty"` // resolve: ResolveKvData at this ts; gc: the safe point
	// clear: the dropped range (empty End = +inf).
	Start []byte `json:"sk,omitempty"`
	End   []byte `json:"ek,omitempty"`
	// gen: the file's store and compaction generation.
	Store uint64 `json:"sid,omitempty"`
	Gen   uint64 `json:"g,omitempty"`
	// ident: the cluster id the store belongs to (TiKV's StoreIdent).
	ClusterID uint64 `json:"cid,omitempty"`
}

// wal appends records to the store's raft volume and checkpoints onto its data volume.
type wal struct {
	store uint64
	data  *volumelock.Writer
	raft  *volumelock.Writer
	gen   uint64
	// size is the current log length, to decide when to compact.
	size int64
	// recs are the records found when the wal was opened (checkpoint, then log).
	recs []record
}

// ErrVolumesApart is returned when a store's data and raft volumes do not belong together.
var ErrVolumesApart = errors.New("the data and raft volumes are not one store's at one moment")

// openWAL opens store's state on its data volume dataDir and raft volume raftDir (the same
// directory when the store has one volume), dropping a torn log tail; w.recs holds what it read.
func openWAL(store uint64, dataDir, raftDir string) (*wal, error) {
	if raftDir == "" {
		raftDir = dataDir
	}
	for _, d := range []string{dataDir, raftDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create store dir: %w", err)
		}
	}
	w := &wal{store: store, data: volumelock.NewWriter(dataDir), raft: volumelock.NewWriter(raftDir)}
	ckpt, ckptFound, err := readFrames(filepath.Join(dataDir, ckptFile))
	if err != nil {
		return nil, err
	}
	var n int
	if w.recs, n = decodeFrames(ckpt); n != len(ckpt) {
		// A checkpoint is renamed into place whole: a damaged one is not a crash's doing.
		return nil, fmt.Errorf("checkpoint %s is damaged at offset %d", filepath.Join(dataDir, ckptFile), n)
	}
	b, _, err := readFrames(filepath.Join(raftDir, logFile))
	if err != nil {
		return nil, err
	}
	logRecs, good := decodeFrames(b)
	ckptGen, err := w.header(w.recs, ckptFound, "checkpoint on the data volume "+dataDir)
	if err != nil {
		return nil, err
	}
	logGen, err := w.header(logRecs, good > 0, "log on the raft volume "+raftDir)
	if err != nil {
		return nil, err
	}
	if len(w.recs) > 0 {
		w.recs = w.recs[1:]
	}
	switch {
	case !ckptFound && good == 0:
		// A fresh store (or one that crashed writing its first record).
	case good > 0 && logGen == ckptGen:
		w.recs = append(w.recs, logRecs[1:]...)
	case ckptFound && good > 0 && logGen+1 == ckptGen:
		// A crash between the checkpoint and the log's replacement: the checkpoint holds it all.
		good = 0
	case good == 0:
		return nil, fmt.Errorf("%w: store %d's data volume %s holds checkpoint generation %d but its raft volume %s has no log",
			ErrVolumesApart, store, dataDir, ckptGen, raftDir)
	default:
		return nil, fmt.Errorf("%w: store %d's raft volume %s holds log generation %d, its data volume %s checkpoint generation %d",
			ErrVolumesApart, store, raftDir, logGen, dataDir, ckptGen)
	}
	w.gen = ckptGen
	if good == 0 || good < len(b) {
		// A torn tail (or a log the checkpoint superseded): rewrite the good prefix into a new
		// file (never truncate in place).
		keep := b[:good]
		if good == 0 {
			if keep, err = encodeFrames([]record{w.genRecord()}); err != nil {
				return nil, err
			}
		}
		if err := w.raft.Replace(logFile, keep); err != nil {
			return nil, fmt.Errorf("drop torn log tail: %w", err)
		}
		good = len(keep)
	}
	w.size = int64(good)
	return w, nil
}

func readFrames(path string) ([]byte, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	return b, true, nil
}

// header checks that recs, when found, start with this store's "gen" record and returns its
// generation.
func (w *wal) header(recs []record, found bool, what string) (uint64, error) {
	if !found {
		return 0, nil
	}
	if len(recs) == 0 || recs[0].Kind != "gen" {
		return 0, fmt.Errorf("%w: the %s does not start with a generation record", ErrVolumesApart, what)
	}
	if recs[0].Store != w.store {
		return 0, fmt.Errorf("%w: the %s belongs to store %d, not %d", ErrVolumesApart, what, recs[0].Store, w.store)
	}
	return recs[0].Gen, nil
}

func (w *wal) genRecord() record { return record{Kind: "gen", Store: w.store, Gen: w.gen} }

// decodeFrames returns the records of every intact frame and the length of
// the intact prefix; decoding stops at the first short or corrupt frame.
func decodeFrames(b []byte) ([]record, int) {
	var out []record
	off := 0
	for off+8 <= len(b) {
		n := int(binary.LittleEndian.Uint32(b[off:]))
		sum := binary.LittleEndian.Uint32(b[off+4:])
		if off+8+n > len(b) {
			break
		}
		p := b[off+8 : off+8+n]
		if crc32.Checksum(p, crcTable) != sum {
			break
		}
		var r record
		if err := json.Unmarshal(p, &r); err != nil {
			break
		}
		out = append(out, r)
		off += 8 + n
	}
	return out, off
}

func encodeFrames(recs []record) ([]byte, error) {
	var buf []byte
	for i := range recs {
		p, err := json.Marshal(&recs[i])
		if err != nil {
			return nil, fmt.Errorf("encode record: %w", err)
		}
		var h [8]byte
		binary.LittleEndian.PutUint32(h[:], uint32(len(p)))
		binary.LittleEndian.PutUint32(h[4:], crc32.Checksum(p, crcTable))
		buf = append(buf, h[:]...)
		buf = append(buf, p...)
	}
	return buf, nil
}

// append persists recs with one fsync; on return they survive a crash.
func (w *wal) append(recs []record) error {
	if len(recs) == 0 {
		return nil
	}
	b, err := encodeFrames(recs)
	if err != nil {
		return err
	}
	if err := w.raft.Append(logFile, b); err != nil {
		return fmt.Errorf("append log: %w", err)
	}
	w.size += int64(len(b))
	return nil
}

// rewrite makes recs the whole state (compaction): a new checkpoint on the data volume, then an
// empty log of its generation on the raft volume.
func (w *wal) rewrite(recs []record) error {
	w.gen++
	b, err := encodeFrames(append([]record{w.genRecord()}, recs...))
	if err != nil {
		return err
	}
	if err := w.data.Replace(ckptFile, b); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	head, err := encodeFrames([]record{w.genRecord()})
	if err != nil {
		return err
	}
	if err := w.raft.Replace(logFile, head); err != nil {
		return fmt.Errorf("start the log after a checkpoint: %w", err)
	}
	w.size = int64(len(head))
	return nil
}
