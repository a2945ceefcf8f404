package warmup

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// walWriter writes RocksDB's log format as db/log_format.h describes it, for the tests only:
// 32 KiB blocks, a write split into first/middle/last fragments where it does not fit, a
// block's tail shorter than a header zero-filled, a masked CRC32C over the type byte (and the
// log number of a recyclable header) and the payload.
type walWriter struct {
	buf        bytes.Buffer
	logNumber  uint32
	recyclable bool
	// offsets are where each write's first record starts.
	offsets []int64
}

func (w *walWriter) headerSize() int {
	if w.recyclable {
		return walRecyclableHeaderSize
	}
	return walHeaderSize
}

// add appends one write.
func (w *walWriter) add(payload []byte) {
	w.offsets = append(w.offsets, -1)
	first := true
	for {
		left := walBlockSize - w.buf.Len()%walBlockSize
		if left < w.headerSize() {
			w.buf.Write(make([]byte, left))
			continue
		}
		room := left - w.headerSize()
		n := min(room, len(payload))
		end := n == len(payload)
		var typ byte
		switch {
		case first && end:
			typ = walFullType
		case first:
			typ = walFirstType
		case end:
			typ = walLastType
		default:
			typ = walMiddleType
		}
		if w.offsets[len(w.offsets)-1] < 0 {
			w.offsets[len(w.offsets)-1] = int64(w.buf.Len())
		}
		w.record(typ, payload[:n])
		payload, first = payload[n:], false
		if end {
			return
		}
	}
}

// record appends one physical record of typ (its recyclable twin in a recyclable log).
func (w *walWriter) record(typ byte, payload []byte) {
	if w.recyclable && typ >= walFullType && typ <= walLastType {
		typ += walRecyclableFullType - walFullType
	}
	covered := []byte{typ}
	if walRecyclable(typ) {
		covered = binary.LittleEndian.AppendUint32(covered, w.logNumber)
	}
	covered = append(covered, payload...)
	h := binary.LittleEndian.AppendUint32(nil, walMask(crc32.Checksum(covered, castagnoli)))
	h = binary.LittleEndian.AppendUint16(h, uint16(len(payload)))
	w.buf.Write(h)
	w.buf.Write(covered)
}

func payloadOf(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = seed + byte(i*7)
	}
	return p
}

// sampleWAL is a log with small writes, writes spanning several blocks and block tails left
// for padding.
func sampleWAL(number uint32, recyclable bool) *walWriter {
	w := &walWriter{logNumber: number, recyclable: recyclable}
	w.add(payloadOf(100, 1))
	w.add(payloadOf(walBlockSize-100-2*w.headerSize()-3, 2)) // leaves a 3-byte tail: padding
	w.add(payloadOf(3*walBlockSize+17, 3))                   // first, middle, middle, last
	w.add(nil)                                               // an empty write is a record too
	w.add(payloadOf(5000, 4))
	return w
}

func verify(t *testing.T, b []byte, number uint64) (int64, string) {
	t.Helper()
	off, reason, err := VerifyWAL(bytes.NewReader(b), number)
	if err != nil {
		t.Fatalf("read error: %v", err)
	}
	return off, reason
}

func TestVerifyWALGoodLogs(t *testing.T) {
	for _, recyclable := range []bool{false, true} {
		t.Run(fmt.Sprintf("recyclable=%v", recyclable), func(t *testing.T) {
			w := sampleWAL(42, recyclable)
			if off, reason := verify(t, w.buf.Bytes(), 42); reason != "" {
				t.Fatalf("a sound log is corrupted at %d: %s", off, reason)
			}
		})
	}
	t.Run("exactly one block", func(t *testing.T) {
		w := &walWriter{}
		w.add(payloadOf(walBlockSize-walHeaderSize, 9))
		if w.buf.Len() != walBlockSize {
			t.Fatalf("writer wrote %d bytes", w.buf.Len())
		}
		if off, reason := verify(t, w.buf.Bytes(), 0); reason != "" {
			t.Fatalf("corrupted at %d: %s", off, reason)
		}
	})
	t.Run("a recycled log ends at the first record of its previous use (RocksDB's reading)", func(t *testing.T) {
		old := sampleWAL(7, true)
		w := &walWriter{logNumber: 8, recyclable: true}
		w.add(payloadOf(100, 5)) // as long as the old log's first write: the next header is the old second
		b := append(w.buf.Bytes(), old.buf.Bytes()[w.buf.Len():]...)
		if off, reason := verify(t, b, 8); reason != "" {
			t.Fatalf("corrupted at %d: %s", off, reason)
		}
	})
	t.Run("a preallocated (zero) region ends a block", func(t *testing.T) {
		w := &walWriter{}
		w.add(payloadOf(100, 1))
		w.buf.Write(make([]byte, walBlockSize-w.buf.Len()))
		w.add(payloadOf(100, 2))
		if off, reason := verify(t, w.buf.Bytes(), 0); reason != "" {
			t.Fatalf("corrupted at %d: %s", off, reason)
		}
	})
}

func TestVerifyWALFindsCorruption(t *testing.T) {
	base := sampleWAL(42, false)
	rec := sampleWAL(42, true)
	third := base.offsets[2]  // first fragment of the multi-block write
	second := base.offsets[1] // a full record
	for _, tt := range []struct {
		name   string
		log    []byte
		number uint64
		at     int64
		reason string
	}{
		{"payload byte", flip(base.buf.Bytes(), second+walHeaderSize+10), 42, second, "checksum mismatch"},
		{"checksum byte", flip(base.buf.Bytes(), second+1), 42, second, "checksum mismatch"},
		{"type byte", flip(base.buf.Bytes(), second+6), 42, second, "checksum mismatch"},
		{"length byte", flip(base.buf.Bytes(), second+4), 42, second, ""},
		{"payload of a middle fragment", flip(base.buf.Bytes(), 2*walBlockSize+walHeaderSize+100), 42, 2 * walBlockSize, "checksum mismatch"},
		{"type byte of a recyclable record", flip(rec.buf.Bytes(), rec.offsets[1]+6), 42, rec.offsets[1], ""},
		{"payload of a recyclable record", flip(rec.buf.Bytes(), rec.offsets[1]+walRecyclableHeaderSize+3), 42, rec.offsets[1], "checksum mismatch"},
		{"torn inside a record", base.buf.Bytes()[:second+50], 42, second, "the log ends inside a record"},
		{"torn inside a header", base.buf.Bytes()[:second+3], 42, second, "the log ends inside a record header"},
		{"torn inside a fragmented write", base.buf.Bytes()[:2*walBlockSize], 42, third, "inside a fragmented write"},
		{"fragment without its start", withRecord(walMiddleType, payloadOf(10, 0)), 0, walHeaderSize + 20, "without the start of its write"},
		{"unknown type", withRecord(17, payloadOf(10, 0)), 0, walHeaderSize + 20, "unknown record type 17"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			off, reason := verify(t, tt.log, tt.number)
			switch {
			case reason == "":
				t.Fatalf("no corruption found")
			case tt.reason != "" && !strings.Contains(reason, tt.reason):
				t.Errorf("reason %q, want %q", reason, tt.reason)
			}
			if tt.reason != "" && off != tt.at {
				t.Errorf("corruption at %d (%s), want %d", off, reason, tt.at)
			}
		})
	}
	// A recyclable record of another log number is where RocksDB stops reading a recycled log:
	// the log ends there, sound.
	if off, reason := verify(t, flip(rec.buf.Bytes(), rec.offsets[1]+8), 42); reason != "" {
		t.Errorf("another log number: corrupted at %d: %s", off, reason)
	}
	if base.offsets[2] != walBlockSize {
		t.Fatalf("the sample log's third write starts at %d, not at its second block: the offsets above are wrong", base.offsets[2])
	}
	// An ignorable unknown type (RocksDB's safe-ignore bit) is no corruption.
	if off, reason := verify(t, withRecord(walIgnorableMask|3, payloadOf(10, 0)), 0); reason != "" {
		t.Errorf("ignorable type: corrupted at %d: %s", off, reason)
	}
}

// flip returns a copy of b with the byte at off inverted.
func flip(b []byte, off int64) []byte {
	c := bytes.Clone(b)
	c[off] ^= 0xff
	return c
}

// withRecord is a log of one full write and then one physical record of typ.
func withRecord(typ byte, payload []byte) []byte {
	w := &walWriter{}
	w.record(walFullType, payloadOf(20, 1))
	w.record(typ, payload)
	return w.buf.Bytes()
}

func TestCheckWALDirectories(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string, b []byte) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := func(n uint32) []byte { return sampleWAL(n, false).buf.Bytes() }
	torn := func(n uint32) []byte { b := good(n); return b[:len(b)-10] }

	// db: two sound logs, then the newest, torn (skipped), and an empty one (skipped).
	write("db/000007.log", good(7))
	write("db/000009.log", good(9))
	newest := write("db/000012.log", torn(12))
	write("db/000013.log", nil)
	write("db/LOG", []byte("RocksDB's info log, not a WAL"))
	write("db/000010.sst", []byte("not a log"))
	// wal: an older log torn (corruption), the newest sound.
	older := write("wal/000003.log", torn(3))
	write("wal/000004.log", good(4))
	// raft-engine's files are another format: not read.
	write("raft-engine/0000000000000001.raftlog", []byte("raft engine"))
	// fsck's directory, root's only on a real volume: never entered.
	write("lost+found/000001.log", []byte("not RocksDB's"))
	write("lost+found/000002.log", []byte("not RocksDB's"))
	if err := os.Chmod(filepath.Join(dir, "lost+found"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(dir, "lost+found"), 0o755) })

	res, err := CheckWAL(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 3 {
		t.Errorf("verified %d logs, want 3 (db 7 and 9, wal 3)", res.Files)
	}
	if want := []string{newest, filepath.Join(dir, "wal/000004.log")}; strings.Join(res.Skipped, ",") != strings.Join(want, ",") {
		t.Errorf("skipped %v, want the newest of each directory %v", res.Skipped, want)
	}
	if len(res.Corruptions) != 1 || res.Corruptions[0].File != older || !strings.Contains(res.Corruptions[0].Reason, "ends inside") {
		t.Fatalf("corruptions %+v, want the torn tail of %s", res.Corruptions, older)
	}
	if c := res.Corruptions[0]; c.Offset <= 0 || c.Offset >= int64(len(torn(3))) {
		t.Errorf("offset %d outside the file", c.Offset)
	}

	// A directory of one log checks nothing; a missing directory is an error.
	one := t.TempDir()
	if err := os.WriteFile(filepath.Join(one, "000001.log"), torn(1), 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := CheckWAL(context.Background(), one); err != nil || res.Files != 0 || len(res.Corruptions) != 0 || len(res.Skipped) != 1 {
		t.Errorf("one torn log: %+v, %v; want it skipped", res, err)
	}
	if _, err := CheckWAL(context.Background(), filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing directory passed")
	}
}

func TestWALNumber(t *testing.T) {
	for name, want := range map[string]bool{"000001.log": true, "123.log": true, "LOG": false, "LOG.old.1": false, ".log": false,
		"00a1.log": false, "000001.log.tmp": false, "000001.LOG": false} {
		if _, ok := walNumber(name); ok != want {
			t.Errorf("%s: numbered log %v, want %v", name, ok, want)
		}
	}
}

// FuzzVerifyWAL: any bytes, including mutations of sound logs, get a verdict, never a panic,
// and a corruption's offset lies inside the log.
func FuzzVerifyWAL(f *testing.F) {
	f.Add(sampleWAL(1, false).buf.Bytes(), uint64(1))
	f.Add(sampleWAL(1, true).buf.Bytes(), uint64(1))
	f.Add(withRecord(walMiddleType, nil), uint64(0))
	f.Add([]byte{}, uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, number uint64) {
		off, reason, err := VerifyWAL(bytes.NewReader(b), number)
		if err != nil {
			t.Fatalf("read error from memory: %v", err)
		}
		if reason != "" && (off < 0 || off >= int64(len(b))) {
			t.Fatalf("corruption %q at %d outside a log of %d bytes", reason, off, len(b))
		}
	})
}

// TestRunChecksWAL: the WAL check runs before the warm-up; its corruption is recorded in the
// summary, and with ExitOnCorruption fails the run, naming the file and offset, before
// anything is read.
func TestRunChecksWAL(t *testing.T) {
	volume := t.TempDir()
	good := sampleWAL(5, false).buf.Bytes()
	older := sampleWAL(4, false)
	at := older.offsets[1]
	bad := flip(older.buf.Bytes(), at+walHeaderSize+5)
	for name, b := range map[string][]byte{"db/000004.log": bad, "db/000005.log": good, "db/000006.sst": payloadOf(3*Align, 1)} {
		p := filepath.Join(volume, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	corrupted := filepath.Join(volume, "db/000004.log")
	o := Options{FS: []string{volume}, WAL: []string{volume}, Workers: 2, ChunkSize: Align}

	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("without ExitOnCorruption the run fails: %v", err)
	}
	if sum.WALCorruptions != 1 || len(sum.WAL) != 1 || sum.WAL[0].Corruptions[0].File != corrupted || sum.WAL[0].Corruptions[0].Offset != at {
		t.Errorf("summary WAL %+v, %d corruptions; want %s at %d", sum.WAL, sum.WALCorruptions, corrupted, at)
	}
	if !sum.Complete || sum.Bytes == 0 {
		t.Errorf("the volume was not warmed up: %+v", sum)
	}

	o.ExitOnCorruption, o.Checkpoint = true, false
	sum, err = Run(context.Background(), o)
	if want := fmt.Sprintf("%s at offset %d: checksum mismatch", corrupted, at); !errors.Is(err, ErrWALCorrupted) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %v naming %s", err, ErrWALCorrupted, want)
	}
	if sum.Bytes != 0 || sum.Complete || sum.WALCorruptions != 1 {
		t.Errorf("a run that stopped on corruption read %d bytes, complete %v, %d corruptions", sum.Bytes, sum.Complete, sum.WALCorruptions)
	}

	// Only the WAL: nothing else to read, a sound log passes.
	if err := os.Remove(corrupted); err != nil {
		t.Fatal(err)
	}
	sum, err = Run(context.Background(), Options{WAL: []string{volume}, ExitOnCorruption: true})
	if err != nil || sum.WALCorruptions != 0 || len(sum.WAL) != 1 || len(sum.WAL[0].Skipped) != 1 {
		t.Errorf("a sound WAL: %+v, %v", sum, err)
	}
	if _, err := Run(context.Background(), Options{WAL: []string{filepath.Join(volume, "missing")}}); err == nil || !strings.Contains(err.Error(), "WAL directory") {
		t.Errorf("a missing WAL directory: %v", err)
	}
}

// TestVerifyWALMutations is FuzzVerifyWAL's property over a fixed set of random mutations of
// sound logs (bytes overwritten, tails cut), run with the unit tests: a verdict, never a
// panic, and a corruption's offset inside the log.
func TestVerifyWALMutations(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 5596))
	seeds := [][]byte{sampleWAL(1, false).buf.Bytes(), sampleWAL(1, true).buf.Bytes()}
	found := 0
	for i := range 1000 {
		b := bytes.Clone(seeds[i%2])
		for range 1 + r.IntN(4) {
			b[r.IntN(len(b))] = byte(r.IntN(256))
		}
		if r.IntN(3) == 0 {
			b = b[:r.IntN(len(b))]
		}
		off, reason, err := VerifyWAL(bytes.NewReader(b), uint64(r.IntN(3)))
		if err != nil || reason != "" && (off < 0 || off >= int64(len(b))) {
			t.Fatalf("mutation %d: offset %d reason %q err %v in a log of %d bytes", i, off, reason, err, len(b))
		}
		if reason != "" {
			found++
		}
	}
	if found == 0 {
		t.Error("no mutation was found corrupted: the verifier checks nothing")
	}
}
