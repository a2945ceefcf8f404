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

// walFile is the store's only data file. Its format is a sequence of frames
// [len u32][crc32c u32][payload], payload = one JSON record. Frames are only
// ever appended (under the volume's shared lock, then fsynced); compaction
// writes a whole new file and renames it over the old one.
const walFile = "store.wal"

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// record is one persisted fact. Replaying the records in file order rebuilds
// the store exactly: log entries, hard states, region metas, and apply marks
// whose replay re-executes the committed entries up to that index.
type record struct {
	// Kind: "entries", "hard", "region", "apply", "kv", "resolve",
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
}

// wal appends records to the store's volume.
type wal struct {
	dir string
	w   *volumelock.Writer
	// size is the current file length, to decide when to compact.
	size int64
	// recs are the records found when the wal was opened.
	recs []record
}

// openWAL opens dir's wal, dropping a torn tail; w.recs holds what it read.
func openWAL(dir string) (*wal, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create store dir: %w", err)
	}
	w := &wal{dir: dir, w: volumelock.NewWriter(dir)}
	b, err := os.ReadFile(filepath.Join(dir, walFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read wal: %w", err)
	}
	recs, good := decodeFrames(b)
	if good < len(b) {
		// A torn tail: rewrite the good prefix into a new file (never truncate in place).
		if err := w.w.Replace(walFile, b[:good]); err != nil {
			return nil, fmt.Errorf("drop torn wal tail: %w", err)
		}
	}
	w.size, w.recs = int64(good), recs
	return w, nil
}

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
	if err := w.w.Append(walFile, b); err != nil {
		return fmt.Errorf("append wal: %w", err)
	}
	w.size += int64(len(b))
	return nil
}

// rewrite replaces the whole file with recs (compaction).
func (w *wal) rewrite(recs []record) error {
	b, err := encodeFrames(recs)
	if err != nil {
		return err
	}
	if err := w.w.Replace(walFile, b); err != nil {
		return fmt.Errorf("compact wal: %w", err)
	}
	w.size = int64(len(b))
	return nil
}
