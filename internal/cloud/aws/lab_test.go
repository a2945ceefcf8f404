package aws_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/cloud/aws"
	"github.com/fedbr/fedbr/internal/cloud/budget"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

// lab is the AWS double served over HTTP on 127.0.0.1 with a production provider pointed at
// it through the real SDK.
type lab struct {
	srv *awsdouble.Server
	url string
	p   *aws.Provider
}

type labOptions struct {
	double awsdouble.Options
	limits budget.Limits
	retry  string
	// window is the provider's ConsistencyWindow (0: its default).
	window time.Duration
}

func defaultLabOptions() labOptions {
	return labOptions{limits: budget.ClientLimits(), double: awsdouble.Options{VolumeCreateDuration: 5 * time.Millisecond}}
}

func newLab(t testing.TB, o labOptions) *lab {
	t.Helper()
	srv, err := awsdouble.Open(t.TempDir(), o.double)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close()
	})
	p, err := aws.New(context.Background(), aws.Config{
		Region:       srv.Options().Region,
		Endpoint:     hs.URL,
		AWS:          awsdouble.Config(srv.Options().Region),
		Budget:       budget.New(o.limits, nil),
		PollInterval: 10 * time.Millisecond,
		MaxBackoff:   100 * time.Millisecond,
		RetryMode:    o.retry,
		// ConsistencyWindow 0 is the provider's default.
		ConsistencyWindow: o.window,
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Budget().Pending().SetPollInterval(10 * time.Millisecond)
	return &lab{srv: srv, url: hs.URL, p: p}
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (l *lab) instance(t testing.TB, spec awsdouble.InstanceSpec) awsdouble.InstanceInfo {
	t.Helper()
	info, err := l.srv.CreateInstance(spec)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func readFile(t testing.TB, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return b
}

func volumeDir(t testing.TB, l *lab, id string) string {
	t.Helper()
	d, err := l.srv.VolumeDir(id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func countRecords(b []byte) int { return bytes.Count(b, []byte("\n")) }
