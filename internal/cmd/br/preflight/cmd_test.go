package preflight

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
)

func runPreflight(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := NewCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// TestPreflight: against the AWS double every check passes and the probe object is gone after;
// each fault fails its own check with its own error: no region, no credentials, a bucket that
// does not exist.
func TestPreflight(t *testing.T) {
	l := awsdoubletest.Serve(t, awsdouble.Options{}, "")
	region := l.Server.Options().Region
	if err := awsdouble.CreateBucket(context.Background(), l.Endpoint, "backups"); err != nil {
		t.Fatal(err)
	}
	out, err := runPreflight(t, "--region", region, "--aws-endpoint", l.Endpoint, "--storage", "s3://backups/prod")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"ok    region    " + region, "ok    identity  EnvConfigCredentials (key ", "ok    ec2 ",
		"ok    storage   s3://backups/prod: .fedbr-preflight/"} {
		if !strings.Contains(out, want) {
			t.Errorf("no line %q in:\n%s", want, out)
		}
	}
	b, err := blob.NewS3(context.Background(), blob.S3Config{Region: region, Bucket: "backups", Endpoint: l.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := b.List(context.Background(), ""); err != nil || len(keys) != 0 {
		t.Errorf("the probe object was left: %v, %v", keys, err)
	}

	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	out, err = runPreflight(t, "--aws-endpoint", l.Endpoint)
	if !errors.Is(err, ErrFailed) || !strings.Contains(out, "FAIL  region: no region: give --region") || strings.Contains(out, "identity") {
		t.Errorf("without a region: %v\n%s", err, out)
	}

	out, err = runPreflight(t, "--region", region, "--aws-endpoint", l.Endpoint, "--storage", "s3://missing/prod")
	if !errors.Is(err, ErrFailed) || !strings.Contains(out, "FAIL  storage: s3://missing/prod: write .fedbr-preflight/") ||
		!strings.Contains(out, "NoSuchBucket") || !strings.Contains(out, "ok    ec2") {
		t.Errorf("a missing bucket: %v\n%s", err, out)
	}

	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	out, err = runPreflight(t, "--region", region, "--aws-endpoint", l.Endpoint)
	if !errors.Is(err, ErrFailed) || !strings.Contains(out, "FAIL  identity") || strings.Contains(out, "ec2 ") {
		t.Errorf("without credentials: %v\n%s", err, out)
	}
}
