package awsdouble

import (
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/smithy-go/encoding/cbor"
)

const cloudWatchPrefix = "/service/GraniteServiceVersion20100801/operation/"

// serveCloudWatch answers GetMetricStatistics for AWS/EBS FastSnapshotRestoreCreditsBalance
// (dimensions SnapshotId and AvailabilityZone) in the RPC v2 CBOR protocol: one datapoint,
// now, whose statistics are the current credit balance.
func (s *Server) serveCloudWatch(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.URL.Path, cloudWatchPrefix)
	if op != "GetMetricStatistics" {
		writeCBORError(w, errf(400, "InvalidAction", "operation %s is not supported by the double", op))
		return
	}
	switch s.inject(op) {
	case faultThrottle:
		writeCBORError(w, errf(400, "Throttling", "Rate exceeded"))
		return
	case faultUnavailable:
		writeCBORError(w, errf(503, "ServiceUnavailable", "Service unavailable"))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeCBORError(w, errf(400, "InvalidParameterValue", "read body: %v", err))
		return
	}
	v, err := cbor.Decode(body)
	m, ok := v.(cbor.Map)
	if err != nil || !ok {
		writeCBORError(w, errf(400, "InvalidParameterValue", "request is not a CBOR map"))
		return
	}
	str := func(v cbor.Value) string { x, _ := v.(cbor.String); return string(x) }
	dims := map[string]string{}
	if l, ok := m["Dimensions"].(cbor.List); ok {
		for _, d := range l {
			if dm, ok := d.(cbor.Map); ok {
				dims[str(dm["Name"])] = str(dm["Value"])
			}
		}
	}
	out := cbor.Map{"Label": cbor.String(str(m["MetricName"])), "Datapoints": cbor.List{}}
	if str(m["Namespace"]) == "AWS/EBS" && str(m["MetricName"]) == "FastSnapshotRestoreCreditsBalance" {
		s.mu.Lock()
		f, ok := s.st.FSR[dims["SnapshotId"]+"/"+dims["AvailabilityZone"]]
		if ok && !f.Disabled {
			var size int32
			if sn, ok := s.st.Snapshots[f.SnapshotID]; ok {
				size = sn.SizeGiB
			}
			bal := cbor.Float64(s.credits(f, size, s.now()))
			out["Datapoints"] = cbor.List{cbor.Map{
				"Timestamp":   &cbor.Tag{ID: 1, Value: cbor.Float64(float64(time.Now().Unix()))},
				"Maximum":     bal,
				"Minimum":     bal,
				"Average":     bal,
				"SampleCount": cbor.Float64(1),
				"Sum":         bal,
				"Unit":        cbor.String("None"),
			}}
		}
		s.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/cbor")
	w.Header().Set("Smithy-Protocol", "rpc-v2-cbor")
	_, _ = w.Write(cbor.Encode(out))
}

func writeCBORError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/cbor")
	w.Header().Set("Smithy-Protocol", "rpc-v2-cbor")
	fault := "Sender"
	if e.Status >= 500 {
		fault = "Receiver"
	}
	w.Header().Set("X-Amzn-Query-Error", e.Code+";"+fault)
	w.WriteHeader(e.Status)
	_, _ = w.Write(cbor.Encode(cbor.Map{"__type": cbor.String(e.Code), "message": cbor.String(e.Message)}))
}
