package blob_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

// exercise runs the Store contract against one implementation.
func exercise(t *testing.T, s blob.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.Get(ctx, "backupmeta"); !errors.Is(err, blob.ErrNotFound) {
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
	got, err := s.Get(ctx, "backupmeta")
	if err != nil || string(got) != `{"a":2}` {
		t.Fatalf("get = %q, %v", got, err)
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
	if _, err := s.Get(ctx, "b1/clustermeta"); !errors.Is(err, blob.ErrNotFound) {
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
	s, err := blob.NewS3(context.Background(), blob.S3Config{Region: "us-west-2", Bucket: "meta", Prefix: "fedbr/", Endpoint: hs.URL})
	if err != nil {
		t.Fatal(err)
	}
	exercise(t, s)
}
