package session

import (
	"context"
	"strings"
	"testing"
)

func TestLocation(t *testing.T) {
	for _, tc := range []struct {
		storage string
		want    location
		err     string
	}{
		{"s3://bucket/backups/b1/", location{bucket: "bucket", prefix: "backups/b1/"}, ""},
		{"s3://bucket", location{bucket: "bucket"}, ""},
		{"s3://bucket/b1?region=eu-central-1", location{bucket: "bucket", prefix: "b1/", region: "eu-central-1"}, ""},
		{"s3://bucket/b1?region=us-gov-west-1", location{bucket: "bucket", prefix: "b1/", region: "us-gov-west-1"}, ""},
		{"s3://bucket/b1?region=evil.example.com", location{}, `region "evil.example.com" is not an AWS region name`},
		{"s3://bucket/b1?endpoint=http://x", location{}, `option "endpoint" is not supported`},
		{"s3://bucket/b1?region=eu-west-1&region=us-east-1", location{}, "is not an AWS region name"},
		{"/data/b1/", location{dir: "/data/b1"}, ""},
		{"file:///data/b1", location{dir: "/data/b1"}, ""},
		{"", location{}, "required"},
		{"s3://", location{}, "want s3://BUCKET"},
		{"file://host/x", location{}, "file:///"},
		{"gcs://b/x", location{}, "only s3://"},
	} {
		f := Flags{Storage: tc.storage}
		got, err := f.location()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want %q", tc.storage, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.storage, got, err, tc.want)
		}
	}
}

func TestStoreInDirectory(t *testing.T) {
	f := Flags{Storage: t.TempDir()}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := f.Store(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := s.Keys(context.Background()); err != nil || len(keys) != 0 {
		t.Fatalf("keys = %v, %v", keys, err)
	}
}
