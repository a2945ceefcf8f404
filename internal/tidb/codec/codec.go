// Package codec converts between the raw keys of TiKV's transactional API and
// the memcomparable form in which TiKV stores them and PD reports region
// boundaries (API v1, TxnKV).
//
// A raw key is cut into groups of 8 bytes; each group is written padded with
// zero bytes to 8, followed by a marker byte 0xFF minus the number of pad
// bytes. A key whose length is a multiple of 8 (the empty key included) ends
// with a group of 8 pad bytes. The encoding keeps byte order: a < b exactly
// when Encode(a) < Encode(b), so a raw range and its encoded range cover the
// same keys.
//
// Region boundaries are the one place an empty key is not a key: it stands
// for −∞ as a start and +∞ as an end, in both forms. EncodeBoundary and
// DecodeBoundary keep it empty; that is how TiDB's client (client-go's
// CodecPDClient) treats the boundaries PD sends.
package codec

import (
	"errors"
	"fmt"

	"github.com/gogo/protobuf/proto"
	"github.com/pingcap/kvproto/pkg/metapb"
)

const (
	group  = 8
	marker = 0xFF
)

// EncodeBytes returns the memcomparable form of a raw key.
func EncodeBytes(raw []byte) []byte {
	out := make([]byte, 0, (len(raw)/group+1)*(group+1))
	for i := 0; i <= len(raw); i += group {
		n := min(group, len(raw)-i)
		out = append(out, raw[i:i+n]...)
		for range group - n {
			out = append(out, 0)
		}
		out = append(out, byte(marker-(group-n)))
	}
	return out
}

// ErrInvalid is wrapped by every decoding error.
var ErrInvalid = errors.New("not a memcomparable-encoded key")

// DecodeBytes decodes one encoded key from the front of b and returns it and
// the bytes after it.
func DecodeBytes(b []byte) (raw, rest []byte, err error) {
	raw = make([]byte, 0, len(b)/(group+1)*group)
	for off := 0; ; off += group + 1 {
		if len(b)-off < group+1 {
			return nil, nil, fmt.Errorf("%w: %d bytes left at offset %d, want a group of %d", ErrInvalid, len(b)-off, off, group+1)
		}
		g, m := b[off:off+group], b[off+group]
		pad := marker - int(m)
		if pad < 0 || pad > group {
			return nil, nil, fmt.Errorf("%w: marker 0x%02x at offset %d", ErrInvalid, m, off+group)
		}
		raw = append(raw, g[:group-pad]...)
		if pad == 0 {
			continue
		}
		for _, z := range g[group-pad:] {
			if z != 0 {
				return nil, nil, fmt.Errorf("%w: non-zero padding in the group at offset %d", ErrInvalid, off)
			}
		}
		return raw, b[off+group+1:], nil
	}
}

// EncodeBoundary encodes a raw range boundary; the empty boundary (−∞ or +∞)
// stays empty.
func EncodeBoundary(raw []byte) []byte {
	if len(raw) == 0 {
		return nil
	}
	return EncodeBytes(raw)
}

// DecodeBoundary decodes a region boundary as PD or TiKV reports it; the empty
// boundary stays empty. A boundary must be exactly one encoded key: TiKV's
// split keys are encoded keys, so anything else is an error, never a guess.
func DecodeBoundary(enc []byte) ([]byte, error) {
	if len(enc) == 0 {
		return nil, nil
	}
	raw, rest, err := DecodeBytes(enc)
	if err != nil {
		return nil, fmt.Errorf("region boundary %x: %w", enc, err)
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("region boundary %x: %w: %d bytes after the key", enc, ErrInvalid, len(rest))
	}
	return raw, nil
}

// DecodeRegion returns a copy of a region as PD reports it with its boundaries decoded into raw
// keys, as TiDB's client (client-go's CodecPDClient) gives regions to its callers; r is left
// alone.
func DecodeRegion(r *metapb.Region) (*metapb.Region, error) {
	start, err := DecodeBoundary(r.GetStartKey())
	if err != nil {
		return nil, fmt.Errorf("region %d: %w", r.GetId(), err)
	}
	end, err := DecodeBoundary(r.GetEndKey())
	if err != nil {
		return nil, fmt.Errorf("region %d: %w", r.GetId(), err)
	}
	raw := proto.Clone(r).(*metapb.Region)
	raw.StartKey, raw.EndKey = start, end
	return raw, nil
}
