package blob_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

// exercise runs the Store contract against one implementation.
func exercise(t *testing.T, s blob.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.Get(ctx, "backupmeta", 1<<20); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("get missing: err = %v, want ErrNotFound", err)
	}
	for key, val := range map[string]string{"backupmeta": `{"a":1}`, "b1/clustermeta": "cm", "b1/restore/out.json": "r"} {
		if err := s.Put(ctx, key, []byte(val)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, "backupmeta", []byte(`{"a":2}`)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "backupmeta", 1<<20)
	if err != nil || string(got) != `{"a":2}` {
		t.Fatalf("get = %q, %v", got, err)
	}
	// Reads are bounded: an object of exactly the limit reads, one byte more is ErrTooLarge.
	if err := s.Put(ctx, "big", []byte(strings.Repeat("x", 100))); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Get(ctx, "big", 100); err != nil || len(b) != 100 {
		t.Fatalf("get 100 bytes with limit 100 = %d bytes, %v", len(b), err)
	}
	if _, err := s.Get(ctx, "big", 99); !errors.Is(err, blob.ErrTooLarge) || !strings.Contains(err.Error(), "big") {
		t.Fatalf("get 100 bytes with limit 99: err = %v, want ErrTooLarge naming the key", err)
	}
	if err := s.Delete(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	keys, err := s.List(ctx, "b1/")
	if err != nil || !slices.Equal(keys, []string{"b1/clustermeta", "b1/restore/out.json"}) {
		t.Fatalf("list = %v, %v", keys, err)
	}
	if err := s.Delete(ctx, "b1/clustermeta"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "b1/clustermeta"); err != nil {
		t.Fatalf("delete missing: %v", err)
	}
	if _, err := s.Get(ctx, "b1/clustermeta", 1<<20); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("get deleted: err = %v", err)
	}
}

func TestDir(t *testing.T) {
	s, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	exercise(t, s)
	if err := s.Put(context.Background(), "../escape", nil); err == nil {
		t.Fatal("a key escaping the root was accepted")
	}
}

// TestDirReadsAtMostLimitPlusOne: an endless object (a key that is /dev/zero) is refused after
// limit+1 bytes; a read that did not stop there would never return.
func TestDirReadsAtMostLimitPlusOne(t *testing.T) {
	root := t.TempDir()
	s, err := blob.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(root, "backupmeta")); err != nil {
		t.Skip(err)
	}
	if _, err := s.Get(context.Background(), "backupmeta", 1<<20); !errors.Is(err, blob.ErrTooLarge) {
		t.Fatalf("get an endless object: err = %v, want ErrTooLarge", err)
	}
}

func TestS3AgainstDouble(t *testing.T) {
	srv, err := awsdouble.Open(t.TempDir(), awsdouble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer func() { _ = srv.Close() }()
	req, _ := http.NewRequest(http.MethodPut, hs.URL+"/meta", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	s, err := blob.NewS3(context.Background(), blob.S3Config{Region: "us-west-2", Bucket: "meta", Prefix: "fedbr/", Endpoint: hs.URL,
		AWS: awsdouble.Config("us-west-2")})
	if err != nil {
		t.Fatal(err)
	}
	exercise(t, s)
}
