package cloud

import (
	"math"
	"time"
)

// FSRBucket is the fast snapshot restore credit bucket of a snapshot of sizeGiB (the source
// volume size): at most capacity credits, refilled at perHour credits per hour, starting
// empty when FSR is enabled.
func FSRBucket(sizeGiB int32) (capacity, perHour float64) {
	if sizeGiB <= 0 {
		sizeGiB = 1
	}
	fill := math.Min(10, 1024/float64(sizeGiB))
	return math.Max(1, fill), fill
}

// FSRETA is how long a snapshot's bucket holding balance credits needs to reach want credits
// (capped at the bucket capacity).
func FSRETA(sizeGiB int32, balance, want float64) time.Duration {
	capacity, perHour := FSRBucket(sizeGiB)
	want = math.Min(want, capacity)
	if balance >= want {
		return 0
	}
	return time.Duration((want - balance) / perHour * float64(time.Hour))
}
