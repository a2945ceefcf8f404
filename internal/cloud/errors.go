package cloud

import (
	"context"
	"errors"
	"net"
	"syscall"
)

// ErrSnapshotFailed marks a snapshot that went to the error state.
var ErrSnapshotFailed = errors.New("snapshot failed")

// ErrVolumeFailed marks a volume that went to the error state.
var ErrVolumeFailed = errors.New("volume failed")

// ErrTooManyTags marks a request that would exceed the 50-tag limit of a resource.
var ErrTooManyTags = errors.New("more than 50 tags")

// MaxTags is the tag limit of one resource.
const MaxTags = 50

type coded interface{ ErrorCode() string }

type statusCoded interface{ HTTPStatusCode() int }

// retryableCodes are API error codes that say "not now" rather than "no": throttling, quota
// queues that drain by themselves, transient state and server-side failures.
var retryableCodes = map[string]bool{
	// throttling
	"RequestLimitExceeded":      true,
	"Throttling":                true,
	"ThrottlingException":       true,
	"RequestThrottledException": true,
	"RequestThrottled":          true,
	"TooManyRequestsException":  true,
	"SlowDown":                  true,
	"EC2ThrottledException":     true,
	// quotas that drain as snapshots complete
	"PendingSnapshotLimitExceeded":          true,
	"SnapshotCreationPerVolumeRateExceeded": true,
	"ConcurrentLimitExceededException":      true,
	// transient state (a volume still detaching, a snapshot still in use)
	"IncorrectState": true,
	// server side
	"InternalError":           true,
	"InternalFailure":         true,
	"InternalServerError":     true,
	"InternalServerException": true,
	"ServiceUnavailable":      true,
	"Unavailable":             true,
	"RequestTimeout":          true,
}

var notFoundCodes = map[string]bool{
	"InvalidSnapshot.NotFound":   true,
	"InvalidVolume.NotFound":     true,
	"InvalidInstanceID.NotFound": true,
	"ResourceNotFoundException":  true,
	"NoSuchKey":                  true,
	"NotFound":                   true,
}

// IsRetryable reports whether a cloud call that failed with err may succeed if repeated
// later unchanged. Cancellation and deadline are never retryable (the caller gave up);
// API errors are judged by code (throttling, draining quotas, transient state, server
// faults); an error without a code is retryable when the HTTP status is 5xx or 429, or when
// the connection failed (the server was restarting or unreachable, or closed the connection
// without an answer). A resend of a call that is not idempotent may repeat what it did: the
// caller decides whether to resend (the AWS provider looks for a lost create's result first).
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var c coded
	if errors.As(err, &c) {
		if retryableCodes[c.ErrorCode()] {
			return true
		}
	}
	var s statusCoded
	if errors.As(err, &s) {
		code := s.HTTPStatusCode()
		if code >= 500 || code == 429 {
			return true
		}
	}
	if c != nil {
		return false
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	// The SDK's transport marks a request it could not send or whose answer never came (the
	// connection closed): a resend may succeed.
	var conn interface{ ConnectionError() bool }
	if errors.As(err, &conn) && conn.ConnectionError() {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op)
}

// IsNotFound reports whether err says the resource does not exist.
func IsNotFound(err error) bool {
	var c coded
	return errors.As(err, &c) && notFoundCodes[c.ErrorCode()]
}

// IsQuotaWait reports whether err is a quota that frees itself as running operations end
// (pending snapshots, per-volume snapshot rate, EBS direct concurrency): waiting, not failing,
// is the answer.
func IsQuotaWait(err error) bool {
	var c coded
	if !errors.As(err, &c) {
		return false
	}
	switch c.ErrorCode() {
	case "PendingSnapshotLimitExceeded", "SnapshotCreationPerVolumeRateExceeded", "ConcurrentLimitExceededException":
		return true
	}
	return false
}

// IsThrottling reports whether err is a rate-limit answer.
func IsThrottling(err error) bool {
	var c coded
	if !errors.As(err, &c) {
		return false
	}
	switch c.ErrorCode() {
	case "RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottledException",
		"RequestThrottled", "TooManyRequestsException", "SlowDown", "EC2ThrottledException":
		return true
	}
	return false
}
