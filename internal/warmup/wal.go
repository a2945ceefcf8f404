package warmup

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// WAL verification: TiKV's kv engine is RocksDB, whose write-ahead log a snapshot captures
// mid-write. A corrupted WAL makes TiKV refuse to start, or lose writes, after the restore;
// checking it while the volume is warmed up tells before TiKV runs. The check reads RocksDB's
// log format (db/log_format.h and db/log_reader.cc in facebook/rocksdb):
//
//   - the file is a sequence of 32 KiB blocks (the last one may be short);
//   - a block holds records, each a header and a payload; a block's tail too short for a
//     header is padding (zeros) and skipped;
//   - the header is a masked CRC32C (4 bytes, little endian), the payload length (2 bytes,
//     little endian) and the record type (1 byte); the recyclable types (a log file reused by
//     recycle_log_file_num) add the log number (4 bytes, little endian, the file number's low
//     32 bits) to the header;
//   - the CRC32C covers the type byte, the log number of a recyclable header, and the payload;
//     it is stored masked (rotated right by 15 bits, plus a constant);
//   - a write larger than a block's room is split into first, middle… and last fragments, one
//     per block; a small one is a full record;
//   - a record of type 0 and length 0 is a preallocated region: the rest of its block is skipped;
//   - a recyclable record whose log number is not the file's is left from the file's previous
//     use: the log ends there.
//
// Any other shape is corruption: a checksum mismatch, a record running past its block, a
// fragment out of sequence, an unknown type that RocksDB may not ignore, or a log that ends
// inside a header or a fragmented write. The newest log of a directory is not checked (a
// snapshot taken while TiKV appends to it may tear its tail; RocksDB tolerates that in the
// last log only), and empty logs have nothing to check.

// Record types of RocksDB's log format.
const (
	walZeroType                = 0
	walFullType                = 1
	walFirstType               = 2
	walMiddleType              = 3
	walLastType                = 4
	walRecyclableFullType      = 5
	walRecyclableFirstType     = 6
	walRecyclableMiddleType    = 7
	walRecyclableLastType      = 8
	walSetCompressionType      = 9
	walTimestampSizeType       = 10
	walRecyclableTimestampType = 11
	walPredecessorType         = 33
	walRecyclablePredecessor   = 34
	// walIgnorableMask marks types a reader that does not know them may skip.
	walIgnorableMask = 1 << 5
)

// Layout of RocksDB's log format.
const (
	walBlockSize            = 32 << 10
	walHeaderSize           = 4 + 2 + 1
	walRecyclableHeaderSize = walHeaderSize + 4
	walMaskDelta            = 0xa282ead8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// walMask is how RocksDB stores a CRC32C next to the data it covers.
func walMask(crc uint32) uint32 { return (crc>>15 | crc<<17) + walMaskDelta }

// WALCorruption is one corrupted RocksDB log file: where its first bad record starts and why.
type WALCorruption struct {
	File   string `json:"file"`
	Offset int64  `json:"offset"`
	Reason string `json:"reason"`
}

func (c WALCorruption) String() string {
	return fmt.Sprintf("%s at offset %d: %s", c.File, c.Offset, c.Reason)
}

// WALResult is the WAL check of one directory tree.
type WALResult struct {
	Path string `json:"path"`
	// Files and Bytes are the RocksDB logs verified.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Skipped are the newest log of each directory, which a snapshot may have torn.
	Skipped     []string        `json:"skipped,omitempty"`
	Corruptions []WALCorruption `json:"corruptions,omitempty"`
	// Error says why the check could not finish (a directory or file that cannot be read).
	Error string `json:"error,omitempty"`
}

// ErrWALCorrupted marks a run that stopped on WAL corruption (Options.ExitOnCorruption).
var ErrWALCorrupted = errors.New("RocksDB WAL corrupted")

// walLog is one numbered RocksDB log file.
type walLog struct {
	path   string
	number uint64
	size   int64
}

// walLogs finds the non-empty numbered RocksDB logs (<number>.log) under root, by directory,
// each directory's in log-number order. Symlinks are not followed; lost+found, which fsck
// owns (root only) and RocksDB never writes to, is not entered.
func walLogs(ctx context.Context, root string) (map[string][]walLog, error) {
	dirs := map[string][]walLog{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if path != root && d != nil && d.IsDir() && d.Name() == "lost+found" {
			return fs.SkipDir
		}
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		n, ok := walNumber(d.Name())
		if !ok || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() > 0 {
			dir := filepath.Dir(path)
			dirs[dir] = append(dirs[dir], walLog{path: path, number: n, size: info.Size()})
		}
		return nil
	})
	for _, logs := range dirs {
		slices.SortFunc(logs, func(a, b walLog) int { return cmpUint(a.number, b.number) })
	}
	return dirs, err
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// walNumber is the log number of a RocksDB log file name (digits, then ".log"; RocksDB's
// info logs, LOG and LOG.old.*, are not numbered).
func walNumber(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, ".log")
	if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// CheckWAL verifies every non-empty numbered RocksDB log under dir but the newest of each
// directory. A corruption is recorded, not returned: the error says only why the check could
// not finish.
func CheckWAL(ctx context.Context, dir string) (WALResult, error) {
	res := WALResult{Path: dir}
	root, err := fsRoot("WAL directory", dir)
	if err != nil {
		return res, err
	}
	byDir, err := walLogs(ctx, root)
	if err != nil {
		return res, fmt.Errorf("list the RocksDB logs under %s: %w", dir, err)
	}
	dirs := make([]string, 0, len(byDir))
	for d := range byDir {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		logs := byDir[d]
		res.Skipped = append(res.Skipped, logs[len(logs)-1].path)
		for _, l := range logs[:len(logs)-1] {
			c, err := verifyWALFile(l)
			if err != nil {
				return res, err
			}
			res.Files++
			res.Bytes += l.size
			if c != nil {
				res.Corruptions = append(res.Corruptions, *c)
			}
		}
	}
	return res, nil
}

func verifyWALFile(l walLog) (*WALCorruption, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, fmt.Errorf("open RocksDB log %s: %w", l.path, err)
	}
	defer func() { _ = f.Close() }()
	off, reason, err := VerifyWAL(bufio.NewReaderSize(f, walBlockSize), l.number)
	if err != nil {
		return nil, fmt.Errorf("read RocksDB log %s at offset %d: %w", l.path, off, err)
	}
	if reason == "" {
		return nil, nil
	}
	return &WALCorruption{File: l.path, Offset: off, Reason: reason}, nil
}

// VerifyWAL reads one whole RocksDB log, numbered logNumber, from r and checks every record.
// It returns the offset of the first bad record and why it is bad, or reason "" when the log
// is sound; err is a read error (at offset).
func VerifyWAL(r io.Reader, logNumber uint64) (offset int64, reason string, err error) {
	v := walVerifier{logNumber: uint32(logNumber)} //nolint:gosec // G115: recyclable records carry the log number's low 32 bits, as RocksDB truncates it
	block := make([]byte, walBlockSize)
	for {
		n, err := io.ReadFull(r, block)
		switch {
		case errors.Is(err, io.EOF):
			return v.end(v.base)
		case errors.Is(err, io.ErrUnexpectedEOF):
			if off, reason, done := v.block(block[:n], true); done {
				return off, reason, nil
			}
			return v.end(v.base + int64(n))
		case err != nil:
			return v.base, "", err
		}
		if off, reason, done := v.block(block, false); done {
			return off, reason, nil
		}
		v.base += walBlockSize
	}
}

// walVerifier walks the records of one log, block by block.
type walVerifier struct {
	logNumber uint32
	base      int64 // offset of the current block
	// inFragRec says a write was begun in fragments and not ended yet; fragment is the offset
	// of its first fragment.
	inFragRec bool
	fragment  int64
}

// block checks the records of one block (last: the file ends inside it). done says the log
// ends here: at a corruption (reason set), or at a record of the file's previous use.
func (v *walVerifier) block(b []byte, last bool) (offset int64, reason string, done bool) {
	for pos := 0; pos < len(b); {
		at := v.base + int64(pos)
		rest := b[pos:]
		switch {
		case !last && len(rest) < walRecyclableHeaderSize && allZero(rest):
			// Padding: a block's tail too short for a header (a recyclable one in a recycled
			// log) is zero-filled, and a write goes on in the next block.
			return 0, "", false
		case len(rest) < walHeaderSize && last:
			return at, "the log ends inside a record header", true
		case len(rest) < walHeaderSize:
			return 0, "", false // a tail too short for any header: RocksDB skips it whatever it holds
		}
		length := int(binary.LittleEndian.Uint16(rest[4:6]))
		typ := rest[6]
		header := walHeaderSize
		if walRecyclable(typ) {
			header = walRecyclableHeaderSize
			if len(rest) < header {
				if last {
					return at, "the log ends inside a record header", true
				}
				return at, fmt.Sprintf("recyclable record header runs past its block (%d bytes left)", len(rest)), true
			}
			if binary.LittleEndian.Uint32(rest[7:11]) != v.logNumber {
				// Left from the file's previous use: the log ends here, unless a write was cut.
				if v.inFragRec {
					return v.fragment, "the log ends inside a fragmented write", true
				}
				return 0, "", true
			}
		}
		if header+length > len(rest) {
			if last {
				return at, fmt.Sprintf("the log ends inside a record of %d bytes", length), true
			}
			return at, fmt.Sprintf("record length %d runs past its block (%d bytes left)", length, len(rest)-header), true
		}
		if typ == walZeroType && length == 0 {
			if v.inFragRec {
				return v.fragment, "a preallocated (zero) region inside a fragmented write", true
			}
			return 0, "", false // preallocated: the rest of the block is skipped
		}
		want := binary.LittleEndian.Uint32(rest[0:4])
		if got := walMask(crc32.Checksum(rest[6:header+length], castagnoli)); got != want {
			return at, fmt.Sprintf("checksum mismatch (stored %#08x, computed %#08x over type %d and %d payload bytes)", want, got, typ, length), true
		}
		if reason := v.sequence(typ, at); reason != "" {
			return at, reason, true
		}
		pos += header + length
	}
	return 0, "", false
}

// sequence checks a record of type typ at offset at against the fragments before it.
func (v *walVerifier) sequence(typ byte, at int64) string {
	switch typ {
	case walFullType, walRecyclableFullType, walFirstType, walRecyclableFirstType:
		if v.inFragRec {
			return fmt.Sprintf("a new write (type %d) before the fragmented write at offset %d ended", typ, v.fragment)
		}
		if typ == walFirstType || typ == walRecyclableFirstType {
			v.inFragRec, v.fragment = true, at
		}
	case walMiddleType, walRecyclableMiddleType, walLastType, walRecyclableLastType:
		if !v.inFragRec {
			return fmt.Sprintf("a fragment (type %d) without the start of its write", typ)
		}
		if typ == walLastType || typ == walRecyclableLastType {
			v.inFragRec = false
		}
	case walSetCompressionType, walTimestampSizeType, walRecyclableTimestampType, walPredecessorType, walRecyclablePredecessor:
		if v.inFragRec {
			return fmt.Sprintf("a metadata record (type %d) inside the fragmented write at offset %d", typ, v.fragment)
		}
	default:
		if typ&walIgnorableMask == 0 {
			return fmt.Sprintf("unknown record type %d", typ)
		}
	}
	return ""
}

// end is the verdict at the end of the log, offset size.
func (v *walVerifier) end(size int64) (int64, string, error) {
	if v.inFragRec {
		return v.fragment, fmt.Sprintf("the log ends (at %d) inside a fragmented write", size), nil
	}
	return 0, "", nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// walRecyclable says whether records of type typ carry the log number in their header.
func walRecyclable(typ byte) bool {
	return typ >= walRecyclableFullType && typ <= walRecyclableLastType || typ == walRecyclableTimestampType || typ == walRecyclablePredecessor
}
