package cloud

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func apiErr(code string) error { return &smithy.GenericAPIError{Code: code, Message: "m"} }

func httpErr(status int, err error) error {
	return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: err}
}

// connErr is how the SDK's transport reports a request sent whose answer never came.
type connErr struct{ err error }

func (e connErr) Error() string         { return "send request: " + e.err.Error() }
func (e connErr) Unwrap() error         { return e.err }
func (e connErr) ConnectionError() bool { return true }

func TestIsRetryable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"ec2 throttling", apiErr("RequestLimitExceeded"), true},
		{"ebs throttling wrapped", fmt.Errorf("list blocks: %w", apiErr("RequestThrottledException")), true},
		{"pending quota drains", apiErr("PendingSnapshotLimitExceeded"), true},
		{"per-volume snapshot rate", apiErr("SnapshotCreationPerVolumeRateExceeded"), true},
		{"volume still detaching", apiErr("IncorrectState"), true},
		{"server fault", apiErr("InternalError"), true},
		{"unavailable", apiErr("Unavailable"), true},
		{"not found is final", apiErr("InvalidSnapshot.NotFound"), false},
		{"bad parameter is final", apiErr("InvalidParameterValue"), false},
		{"tag limit is final", apiErr("TagLimitExceeded"), false},
		{"unknown code with 503", httpErr(503, apiErr("Whatever")), true},
		{"unknown code with 400", httpErr(400, apiErr("Whatever")), false},
		{"no code, 500", httpErr(500, errors.New("boom")), true},
		{"connection refused", fmt.Errorf("send: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), true},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"answer lost (connection closed)", fmt.Errorf("call: %w", connErr{io.EOF}), true},
		{"canceled", fmt.Errorf("call: %w", context.Canceled), false},
		{"deadline", context.DeadlineExceeded, false},
		{"plain error", errors.New("bad input"), false},
		{"snapshot failed", fmt.Errorf("wait: %w", ErrSnapshotFailed), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsRetryable(tc.err); got != tc.want {
				t.Fatalf("IsRetryable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestIsNotFoundAndThrottling(t *testing.T) {
	if !IsNotFound(fmt.Errorf("x: %w", apiErr("InvalidVolume.NotFound"))) || IsNotFound(apiErr("IncorrectState")) {
		t.Fatal("IsNotFound misclassifies")
	}
	if !IsThrottling(apiErr("RequestLimitExceeded")) || IsThrottling(apiErr("PendingSnapshotLimitExceeded")) {
		t.Fatal("IsThrottling misclassifies")
	}
	if !IsQuotaWait(fmt.Errorf("x: %w", apiErr("PendingSnapshotLimitExceeded"))) || IsQuotaWait(apiErr("RequestLimitExceeded")) || IsQuotaWait(errors.New("x")) {
		t.Fatal("IsQuotaWait misclassifies")
	}
}

func TestFSRBucket(t *testing.T) {
	for _, tc := range []struct {
		gib           int32
		capacity, per float64
	}{
		{100, 10, 10}, {1024, 1, 1}, {4096, 1, 0.25}, {512, 2, 2}, {0, 10, 10},
	} {
		c, p := FSRBucket(tc.gib)
		if c != tc.capacity || p != tc.per {
			t.Errorf("FSRBucket(%d) = %v, %v; want %v, %v", tc.gib, c, p, tc.capacity, tc.per)
		}
	}
	if got := FSRETA(4096, 0, 1); got != 4*time.Hour {
		t.Errorf("FSRETA(4 TiB) = %v, want 4h", got)
	}
	if got := FSRETA(100, 3, 1); got != 0 {
		t.Errorf("FSRETA with balance = %v, want 0", got)
	}
	if got := FSRETA(100, 0, 50); got != time.Hour {
		t.Errorf("FSRETA capped = %v, want 1h", got)
	}
}
