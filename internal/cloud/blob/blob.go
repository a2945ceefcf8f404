// Package blob stores backup metadata objects (backupmeta, clustermeta, restore outputs) by
// key: in S3 for real clusters, in a local directory for the lab and demos. It speaks only
// bytes and keys; the metadata layout belongs to the package that uses it.
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// ErrNotFound is returned by Get for a missing key.
var ErrNotFound = errors.New("object not found")

// ErrTooLarge is returned by Get for an object larger than the caller's limit.
var ErrTooLarge = errors.New("object too large")

// Store is a flat key → bytes store. Keys use "/" as separator.
type Store interface {
	Put(ctx context.Context, key string, data []byte) error
	// Get reads at most limit bytes of key: ErrNotFound (wrapped) for a missing key,
	// ErrTooLarge (wrapped) for an object longer than limit, having read at most limit+1
	// bytes of it. What a store holds is untrusted, so every read names its bound.
	Get(ctx context.Context, key string, limit int64) ([]byte, error)
	// Delete succeeds for a missing key.
	Delete(ctx context.Context, key string) error
	// List returns the keys starting with prefix, sorted.
	List(ctx context.Context, prefix string) ([]string, error)
}

// readLimited reads r to its end or limit+1 bytes, whichever comes first: more than limit is
// ErrTooLarge, and the rest of r is never read.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	if limit < 0 {
		return nil, fmt.Errorf("read limit %d: must not be negative", limit)
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	return b, nil
}
