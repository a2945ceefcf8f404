package codec

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pingcap/kvproto/pkg/metapb"
)

func TestEncodeBytesLayout(t *testing.T) {
	for _, tc := range []struct {
		raw, enc []byte
	}{
		{nil, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0xF7}},
		{[]byte{1, 2, 3}, []byte{1, 2, 3, 0, 0, 0, 0, 0, 0xFA}},
		{[]byte("acct0001"), append([]byte("acct0001\xff"), 0, 0, 0, 0, 0, 0, 0, 0, 0xF7)},
		{[]byte("acct000030"), append([]byte("acct0000\xff30"), 0, 0, 0, 0, 0, 0, 0xF9)},
	} {
		if got := EncodeBytes(tc.raw); !bytes.Equal(got, tc.enc) {
			t.Errorf("EncodeBytes(%q) = %x, want %x", tc.raw, got, tc.enc)
		}
		raw, rest, err := DecodeBytes(append(slices.Clone(tc.enc), 0xAB))
		if err != nil || !bytes.Equal(raw, tc.raw) || !bytes.Equal(rest, []byte{0xAB}) {
			t.Errorf("DecodeBytes(%x) = %q, %x, %v", tc.enc, raw, rest, err)
		}
	}
}

func TestEncodingKeepsOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := [][]byte{nil, {0}, {0, 0}, {0xFF}, []byte("acct"), []byte("acct0000"), []byte("acct00000")}
	for range 500 {
		k := make([]byte, rng.IntN(20))
		for i := range k {
			k[i] = byte(rng.IntN(4)) * 0x55 // few symbols, so prefixes collide often
		}
		keys = append(keys, k)
	}
	for _, a := range keys {
		for _, b := range keys {
			if got, want := bytes.Compare(EncodeBytes(a), EncodeBytes(b)), bytes.Compare(a, b); got != want {
				t.Fatalf("compare(enc %x, enc %x) = %d, raw compare = %d", a, b, got, want)
			}
		}
	}
}

func TestDecodeRefusesWhatIsNotAnEncodedKey(t *testing.T) {
	for name, b := range map[string][]byte{
		"raw key":          []byte("acct000030"),
		"short group":      {1, 2, 3, 0xFA},
		"bad marker":       {1, 2, 3, 4, 5, 6, 7, 8, 0x10},
		"non-zero pad":     {1, 2, 3, 0, 0, 0, 0, 9, 0xFA},
		"unfinished":       {1, 2, 3, 4, 5, 6, 7, 8, 0xFF},
		"trailing garbage": append(EncodeBytes([]byte("k")), 1),
	} {
		if _, err := DecodeBoundary(b); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: DecodeBoundary(%x) = %v, want ErrInvalid", name, b, err)
		}
	}
}

func TestBoundariesKeepEmptyAsInfinity(t *testing.T) {
	if EncodeBoundary(nil) != nil {
		t.Error("EncodeBoundary(nil) is not empty")
	}
	if raw, err := DecodeBoundary(nil); raw != nil || err != nil {
		t.Errorf("DecodeBoundary(nil) = %q, %v", raw, err)
	}
	k := []byte("acct000030")
	if raw, err := DecodeBoundary(EncodeBoundary(k)); err != nil || !bytes.Equal(raw, k) {
		t.Errorf("round trip of %q = %q, %v", k, raw, err)
	}
}

func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("acct000030"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, rest, err := DecodeBytes(EncodeBytes(raw))
		if err != nil || !bytes.Equal(got, raw) || len(rest) != 0 {
			t.Fatalf("round trip of %x = %x, %x, %v", raw, got, rest, err)
		}
		_, _, _ = DecodeBytes(raw) // never panics on anything
	})
}

func TestDecodeRegionCopies(t *testing.T) {
	in := &metapb.Region{Id: 3, StartKey: EncodeBytes([]byte("a")), EndKey: nil}
	got, err := DecodeRegion(in)
	if err != nil || !bytes.Equal(got.GetStartKey(), []byte("a")) || len(got.GetEndKey()) != 0 {
		t.Fatalf("DecodeRegion = %v, %v", got, err)
	}
	if !bytes.Equal(in.GetStartKey(), EncodeBytes([]byte("a"))) {
		t.Fatal("the input region was changed")
	}
	if _, err := DecodeRegion(&metapb.Region{Id: 4, EndKey: []byte("raw")}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a raw boundary: %v, want ErrInvalid", err)
	}
}
