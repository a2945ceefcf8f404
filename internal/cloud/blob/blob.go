// Package blob stores backup metadata objects (backupmeta, clustermeta, restore outputs) by
// key: in S3 for real clusters, in a local directory for the lab and demos. It speaks only
// bytes and keys; the metadata layout belongs to the package that uses it.
package blob

import (
	"context"
	"errors"
)

// ErrNotFound is returned by Get for a missing key.
var ErrNotFound = errors.New("object not found")

// Store is a flat key → bytes store. Keys use "/" as separator.
type Store interface {
	Put(ctx context.Context, key string, data []byte) error
	// Get returns ErrNotFound (wrapped) for a missing key.
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete succeeds for a missing key.
	Delete(ctx context.Context, key string) error
	// List returns the keys starting with prefix, sorted.
	List(ctx context.Context, prefix string) ([]string, error)
}
