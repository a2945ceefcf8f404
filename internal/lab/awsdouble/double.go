// Package awsdouble is the lab's stand-in for AWS: one HTTP server that speaks the wire
// protocols of EC2 (Query API, XML), EBS direct (REST-JSON), CloudWatch (RPC v2 CBOR, the
// FastSnapshotRestoreCreditsBalance metric) and S3 (path-style, objects in a directory), so
// the real aws-sdk-go-v2 clients reach it through an endpoint override and fedbr's production
// code runs unchanged against it.
//
// Volumes are directories that lab processes write into following package volumelock;
// CreateSnapshots captures all volumes of the call at one instant by hard-linking their files
// under exclusive locks and recording lengths. Snapshots then complete at a configured speed,
// in a virtual clock that may run faster than the wall clock (Options.TimeFactor) so hours of
// AWS time (FSR credits, 5/s buckets) pass in seconds. AWS's limits are enforced by default
// with AWS's error codes, and faults are injected through the admin endpoints under /_lab/.
//
// Routing on the one listener: a request whose Host is an STS host name
// (sts.REGION.amazonaws.com) is STS (sts.go: GetCallerIdentity presigned, its signature
// checked with the lab's credentials); else POST / with a form body is EC2,
// /service/GraniteServiceVersion20100801/operation/* is CloudWatch, /snapshots/* is EBS direct, /_lab/* is the admin API,
// anything else is S3 (so bucket names "snapshots", "service" and "_lab" are reserved).
package awsdouble

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Options configure the double. The zero value of a field means its default.
type Options struct {
	// Region is the region served; availability zones are Region + a letter. Default us-west-2.
	Region string
	// AccountID is the owner id reported. Default 123456789012.
	AccountID string
	// TimeFactor makes the double's clock run this many times faster than the wall clock:
	// snapshot completion, FSR optimization and credits, and the API token buckets all follow
	// it. Default 1.
	TimeFactor float64
	// SnapshotMBps is the speed at which a snapshot's captured bytes complete. Default 40.
	SnapshotMBps float64
	// SnapshotBaseDuration is added to every snapshot's completion time. Default 0.
	SnapshotBaseDuration time.Duration
	// VolumeCreateDuration is how long a new volume stays "creating". Default 1s.
	VolumeCreateDuration time.Duration
	// FSREnablingDuration is how long FSR stays "enabling". Default 1m.
	FSREnablingDuration time.Duration
	// FSROptimizingPerTiB is how long FSR stays "optimizing" per TiB of volume. Default 1h.
	FSROptimizingPerTiB time.Duration
	// Limits are the enforced API limits and quotas. Default DefaultLimits(), AWS's
	// documented defaults.
	Limits *Limits
	// Unlimited disables all API rate limits and quotas.
	Unlimited bool
	// Volumes is how volumes are kept: VolumesDir (default) or VolumesExt4.
	Volumes string
	// DescribeDelay is AWS's eventual consistency: a snapshot or volume created through the
	// API stays invisible for this long after its creation call returned (in the double's
	// clock). Asked for by id, Describe*, Delete*, CreateTags and the other calls that name it
	// answer InvalidSnapshot.NotFound / InvalidVolume.NotFound; a listing leaves it out.
	// Faults.DescribeDelay overrides it at run time. Default 0 (strongly consistent).
	DescribeDelay time.Duration
	// OmitFullSnapshotSize leaves fullSnapshotSizeInBytes out of DescribeSnapshots, as older
	// AWS answers did, so clients must list blocks.
	OmitFullSnapshotSize bool
	// WebIdentityRoles are the roles of the account that AssumeRoleWithWebIdentity may assume
	// (IRSA), by name, each with the token subjects its trust policy allows (globs, as
	// StringLike on the issuer's sub: system:serviceaccount:*:fedbr-br). Default none.
	WebIdentityRoles map[string][]string
}

func (o Options) withDefaults() Options {
	if o.Region == "" {
		o.Region = "us-west-2"
	}
	if o.AccountID == "" {
		o.AccountID = DefaultAccountID
	}
	if o.TimeFactor <= 0 {
		o.TimeFactor = 1
	}
	if o.SnapshotMBps <= 0 {
		o.SnapshotMBps = 40
	}
	if o.VolumeCreateDuration == 0 {
		o.VolumeCreateDuration = time.Second
	}
	if o.FSREnablingDuration == 0 {
		o.FSREnablingDuration = time.Minute
	}
	if o.FSROptimizingPerTiB == 0 {
		o.FSROptimizingPerTiB = time.Hour
	}
	if o.Limits == nil {
		l := DefaultLimits()
		o.Limits = &l
	}
	return o
}

// Faults are injected failures; the admin endpoint /_lab/faults reads and replaces them.
type Faults struct {
	// Throttle is the fraction (0–1) of API calls answered with the service's throttling
	// error, spread evenly (0.5 throttles every second call).
	Throttle float64 `json:"throttle,omitempty"`
	// ThrottleActions limits Throttle to these actions (empty: all).
	ThrottleActions []string `json:"throttleActions,omitempty"`
	// Latency adds a wall-clock delay per action name ("*" for all).
	Latency map[string]Duration `json:"latency,omitempty"`
	// Unavailable actions ("*" for all) answer the service's unavailable error.
	Unavailable []string `json:"unavailable,omitempty"`
	// SnapshotErrors is the number of next snapshots that go to the error state.
	SnapshotErrors int `json:"snapshotErrors,omitempty"`
	// SnapshotErrorVolumes makes every snapshot of these volumes go to the error state.
	SnapshotErrorVolumes []string `json:"snapshotErrorVolumes,omitempty"`
	// SnapshotErrorAfter is how long a snapshot chosen to fail (SnapshotErrors,
	// SnapshotErrorVolumes) stays pending after its CreateSnapshots before it turns error;
	// 0 fails it at the first describe after the create answered pending.
	SnapshotErrorAfter Duration `json:"snapshotErrorAfter,omitempty"`
	// DropResponses runs the next N calls of an action ("*" for any EC2 action) and then
	// closes the connection instead of answering: the caller sees a transport error, but
	// what the call created or deleted is done. A negative N drops every call.
	DropResponses map[string]int `json:"dropResponses,omitempty"`
	// DescribeDelay, when positive, replaces Options.DescribeDelay for resources created from
	// now on.
	DescribeDelay Duration `json:"describeDelay,omitempty"`
	// DownFor makes the server drop every connection for this long (a stop/restart).
	DownFor Duration `json:"downFor,omitempty"`
}

// Duration is a time.Duration that reads and writes as a string ("1.5s") in JSON.
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Server is the AWS double.
type Server struct {
	dir  string
	opts Options

	mu sync.Mutex
	st *state
	// The clock (now): begun is when the double started (with the monotonic reading), wall
	// the host's wall clock, ahead how far Advance (and a restart that found the saved clock
	// ahead) moved the double's clock.
	begun       time.Time
	wall        func() time.Time
	ahead       time.Duration
	faults      Faults
	downUntil   time.Time
	buckets     map[string]*limiter
	blocks      map[string]*blockSet // snapshot id → non-zero blocks
	hashing     chan struct{}
	throttleAcc float64
	stats       Stats
	// holds are the gates of the actions Hold holds, by action.
	holds map[string]chan struct{}
	// adminHolds release the holds set through the admin API, by action.
	adminHolds map[string]func()
	// egress is the TLS of the double's STS hosts as an HTTPS proxy serves them (webidentity.go).
	egress *tls.Config

	flushMu    sync.Mutex
	flushTimer *time.Timer
	dirty      bool
	closed     bool
}

// Open opens (or creates) the double's state in dir.
func Open(dir string, opts Options) (*Server, error) {
	opts = opts.withDefaults()
	if err := ValidVolumes(opts.Volumes); err != nil {
		return nil, err
	}
	for _, sub := range []string{"volumes", "snapshots", "s3"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("create data dir: %w", err)
		}
	}
	st, err := loadState(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	s := &Server{
		dir:     dir,
		opts:    opts,
		st:      st,
		wall:    func() time.Time { return time.Now().Round(0) },
		buckets: map[string]*limiter{},
		blocks:  map[string]*blockSet{},
		hashing: make(chan struct{}, 2),
	}
	if s.egress, err = egressTLS(dir, opts.Region); err != nil {
		return nil, err
	}
	s.thawAll()
	s.begun = time.Now()
	// AWS's clock kept running while the double was down; it never goes back.
	if d := st.VirtualNow.Sub(s.begun.Round(0)); d > 0 {
		s.ahead = d
	}
	return s, nil
}

// Stats count what the double answered, for tests and benchmarks.
type Stats struct {
	// Calls counts EC2 and EBS direct API calls by action.
	Calls map[string]int `json:"calls"`
	// Errors counts error answers by AWS error code.
	Errors map[string]int `json:"errors"`
	// InjectedThrottles counts throttling answers caused by Faults.Throttle.
	InjectedThrottles int `json:"injectedThrottles"`
	// MaxPending is the highest number of pending snapshots seen after a CreateSnapshots.
	MaxPending int `json:"maxPending"`
	// Hidden counts resources left out of an answer (or answered NotFound) because they were
	// not visible yet (DescribeDelay).
	Hidden int `json:"hidden"`
	// DroppedResponses counts calls run whose answer was dropped (Faults.DropResponses).
	DroppedResponses int `json:"droppedResponses"`
	// VolumesFromSnapshots counts the volumes created from a snapshot (a restore's; a
	// provisioned empty volume does not count).
	VolumesFromSnapshots int `json:"volumesFromSnapshots"`
	// InFlight counts EC2 calls received and not yet run to their end, by action: a call
	// held by Faults.Latency is in flight until AWS has run it, whether or not its caller
	// still waits for the answer.
	InFlight map[string]int `json:"inFlight"`
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Stats{Calls: map[string]int{}, Errors: map[string]int{}, InjectedThrottles: s.stats.InjectedThrottles, MaxPending: s.stats.MaxPending,
		Hidden: s.stats.Hidden, DroppedResponses: s.stats.DroppedResponses, VolumesFromSnapshots: s.stats.VolumesFromSnapshots}
	for k, v := range s.stats.Calls {
		out.Calls[k] = v
	}
	out.InFlight = map[string]int{}
	for k, v := range s.stats.InFlight {
		if v > 0 {
			out.InFlight[k] = v
		}
	}
	for k, v := range s.stats.Errors {
		out.Errors[k] = v
	}
	return out
}

// received records that a call of action arrived; count records that it ran to its end.
func (s *Server) received(action string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stats.InFlight == nil {
		s.stats.InFlight = map[string]int{}
	}
	s.stats.InFlight[action]++
}

// count records a call received (received) and run, and its error code ("" for success).
func (s *Server) count(action, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stats.Calls == nil {
		s.stats.Calls, s.stats.Errors = map[string]int{}, map[string]int{}
	}
	if s.stats.InFlight[action] > 0 {
		s.stats.InFlight[action]--
	}
	s.stats.Calls[action]++
	if code != "" {
		s.stats.Errors[code]++
	}
}

// Dir is the data directory.
func (s *Server) Dir() string { return s.dir }

// Options are the effective options.
func (s *Server) Options() Options { return s.opts }

// Close writes the state to disk; the server can be reopened with Open on the same dir.
func (s *Server) Close() error {
	s.flushMu.Lock()
	s.closed = true
	if s.flushTimer != nil {
		s.flushTimer.Stop()
	}
	s.flushMu.Unlock()
	return s.flush()
}

// now is the double's clock; s.mu is held (Advance moves it). It runs TimeFactor times as
// fast as the monotonic clock from the host's wall clock at the start, plus what Advance
// moved it, and it follows a step of the host's wall clock (more than clockStep), which PD,
// TiKV and the steps read too: AWS and PD both keep to NTP time, and the agent holds a
// snapshot's startTime against the backup ts.
func (s *Server) now() time.Time {
	start, elapsed := s.begun.Round(0), time.Since(s.begun)
	v := start.Add(s.ahead + time.Duration(float64(elapsed)*s.opts.TimeFactor))
	if step := s.wall().Sub(start) - elapsed; step > clockStep || step < -clockStep {
		v = v.Add(step)
	}
	return v
}

// clockStep is the least difference between the host's wall clock and the monotonic clock
// that now counts as a step of the wall clock (reading the two is never exactly in step).
const clockStep = time.Second

// Now is the double's virtual time.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now()
}

// Advance moves the double's clock forward by d at once: snapshots progress, FSR optimizes
// and earns credits, token buckets refill, as if d had passed.
func (s *Server) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d > 0 {
		s.ahead += d
	}
}

// SetFaults replaces the injected faults.
func (s *Server) SetFaults(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
	s.faults.DropResponses = maps.Clone(f.DropResponses) // counted down in place
	if f.DownFor > 0 {
		s.downUntil = time.Now().Add(time.Duration(f.DownFor))
		s.faults.DownFor = 0
	}
}

// Faults are the current faults.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults
	f.DropResponses = maps.Clone(f.DropResponses)
	return f
}

// Validate checks that the faults make sense.
func (f Faults) Validate() error {
	var errs []error
	if f.Throttle < 0 || f.Throttle > 1 {
		errs = append(errs, fmt.Errorf("throttle %v: want a fraction between 0 and 1", f.Throttle))
	}
	if f.SnapshotErrors < 0 {
		errs = append(errs, fmt.Errorf("snapshotErrors %d: want a count of at least 0", f.SnapshotErrors))
	}
	for name, d := range map[string]Duration{"snapshotErrorAfter": f.SnapshotErrorAfter, "describeDelay": f.DescribeDelay, "downFor": f.DownFor} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %s: want a non-negative duration", name, time.Duration(d)))
		}
	}
	for action, d := range f.Latency {
		if d < 0 {
			errs = append(errs, fmt.Errorf("latency of %s %s: want a non-negative duration", action, time.Duration(d)))
		}
	}
	return errors.Join(errs...)
}

// markDirty schedules a state flush; s.mu must be held (the flush takes it later).
func (s *Server) markDirty() {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if s.dirty || s.closed {
		return
	}
	s.dirty = true
	s.flushTimer = time.AfterFunc(50*time.Millisecond, func() { _ = s.flush() })
}

func (s *Server) flush() error {
	s.flushMu.Lock()
	s.dirty = false
	s.flushMu.Unlock()
	s.mu.Lock()
	s.st.VirtualNow = s.now()
	b, err := json.Marshal(s.st)
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	return writeFileAtomic(filepath.Join(s.dir, stateFile), b)
}

func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func newID(prefix string) string {
	var b [9]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])[:17]
}

func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// ServeHTTP routes a request to the service it belongs to.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.down() {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return
			}
		}
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	switch {
	case r.Method == http.MethodConnect:
		s.serveConnect(w, r)
	case isSTSHost(r.Host):
		s.serveSTS(w, r)
	case strings.HasPrefix(r.URL.Path, "/_lab/"):
		s.serveAdmin(w, r)
	case strings.HasPrefix(r.URL.Path, cloudWatchPrefix):
		s.serveCloudWatch(w, r)
	case strings.HasPrefix(r.URL.Path, "/snapshots/"):
		s.serveEBS(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/" &&
		strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded"):
		s.serveEC2(w, r)
	default:
		s.serveS3(w, r)
	}
}

func (s *Server) down() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Before(s.downUntil)
}

// fault is the injected failure for one call, decided before the call runs.
type fault int

const (
	faultNone fault = iota
	faultThrottle
	faultUnavailable
)

// inject applies latency and decides throttling/unavailability for action of a service.
func (s *Server) inject(action string) fault {
	s.mu.Lock()
	f := s.faults
	lat := time.Duration(f.Latency[action])
	if lat == 0 {
		lat = time.Duration(f.Latency["*"])
	}
	var out fault
	switch {
	case contains(f.Unavailable, action) || contains(f.Unavailable, "*"):
		out = faultUnavailable
	case f.Throttle > 0 && (len(f.ThrottleActions) == 0 || contains(f.ThrottleActions, action)):
		// Deterministic spreading: exactly the fraction asked for, evenly, so a test sees
		// the same storm every run.
		s.throttleAcc += f.Throttle
		if s.throttleAcc >= 1 {
			s.throttleAcc--
			out = faultThrottle
			s.stats.InjectedThrottles++
		}
	}
	s.mu.Unlock()
	if lat > 0 {
		time.Sleep(lat)
	}
	return out
}

// dropResponse reports whether the answer to a call of action that just ran is to be dropped,
// consuming one of Faults.DropResponses.
func (s *Server) dropResponse(action string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range []string{action, "*"} {
		n, ok := s.faults.DropResponses[key]
		if !ok || n == 0 {
			continue
		}
		if n > 0 {
			s.faults.DropResponses[key] = n - 1
		}
		s.stats.DroppedResponses++
		return true
	}
	return false
}

// hangUp closes the connection of w without an answer (a lost response); when the
// connection cannot be taken over it answers a bare 502, which the SDK also sees as a
// failed attempt.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
			return
		}
	}
	w.WriteHeader(http.StatusBadGateway)
}

// visibleAt is when a resource created now becomes visible; s.mu is held.
func (s *Server) visibleAt(now time.Time) time.Time {
	d := s.opts.DescribeDelay
	if s.faults.DescribeDelay > 0 {
		d = time.Duration(s.faults.DescribeDelay)
	}
	if d <= 0 {
		return time.Time{}
	}
	return now.Add(d)
}

// visible reports whether a resource that becomes visible at t is visible now, counting a
// hidden one; s.mu is held.
func (s *Server) visible(t time.Time) bool {
	if t.IsZero() || !s.now().Before(t) {
		return true
	}
	s.stats.Hidden++
	return false
}

// snapshotByID is the API's view of a snapshot: absent while it is not visible yet; s.mu is
// held.
func (s *Server) snapshotByID(id string) (*Snapshot, bool) {
	sn, ok := s.st.Snapshots[id]
	if !ok || !s.visible(sn.VisibleAt) {
		return nil, false
	}
	return sn, true
}

// volumeByID is the API's view of a volume: absent while it is not visible yet; s.mu is held.
func (s *Server) volumeByID(id string) (*Volume, bool) {
	v, ok := s.st.Volumes[id]
	if !ok || !s.visible(v.VisibleAt) {
		return nil, false
	}
	return v, true
}

// Hold holds every call of action (an EC2 action name) that arrives from now on, in flight
// (Stats.InFlight), until release is called; each then runs as any other call, whether or not
// its caller still waits for the answer, as AWS runs a call it received after its client hung
// up, gave up or died. Unlike Faults.Latency it holds for no duration: a test releases the
// calls on an event it observed. release may be called more than once; call it before the
// server closes, which waits for the calls it serves.
func (s *Server) Hold(action string) (release func()) {
	gate := make(chan struct{})
	s.mu.Lock()
	if s.holds == nil {
		s.holds = map[string]chan struct{}{}
	}
	s.holds[action] = gate
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.holds[action] == gate {
				delete(s.holds, action)
			}
			s.mu.Unlock()
			close(gate)
		})
	}
}

// held waits while action is held (Hold); the caller's request context is not consulted.
func (s *Server) held(action string) {
	s.mu.Lock()
	gate := s.holds[action]
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
}

// FailSnapshot makes a pending snapshot turn error after d (in the double's clock).
func (s *Server) FailSnapshot(id string, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.st.Snapshots[id]
	if !ok {
		return fmt.Errorf("snapshot %s does not exist", id)
	}
	if st, _ := s.state(sn); st != "pending" {
		return fmt.Errorf("snapshot %s is %s, not pending", id, st)
	}
	if d < 0 {
		return fmt.Errorf("fail snapshot %s after %s: want a non-negative duration", id, d)
	}
	sn.Failed, sn.FailAt = true, s.now().Add(d)
	s.markDirty()
	return nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// limiter is a non-blocking token bucket in the double's virtual time: a call either takes a
// token or is refused with the throttling error, as AWS does.
type limiter struct {
	rate   Rate
	tokens float64
	last   time.Time
}

func (l *limiter) allow(now time.Time) bool {
	if l.rate.PerSecond <= 0 {
		return true
	}
	if now.After(l.last) {
		l.tokens = min(l.rate.Burst, l.tokens+now.Sub(l.last).Seconds()*l.rate.PerSecond)
		l.last = now
	}
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}

// allow takes a token of the bucket named class; s.mu must be held.
func (s *Server) allow(class string, r Rate) bool {
	if s.opts.Unlimited {
		return true
	}
	l, ok := s.buckets[class]
	if !ok {
		l = &limiter{rate: r, tokens: r.Burst, last: s.now()}
		s.buckets[class] = l
	}
	return l.allow(s.now())
}
