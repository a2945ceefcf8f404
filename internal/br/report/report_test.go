package report

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestEnqueue(t *testing.T) {
	a1, a2, b1 := entry{phase: "A", data: "a1"}, entry{phase: "A", data: "a2"}, entry{phase: "B", data: "b1"}
	tests := []struct {
		name string
		q    []entry
		e    entry
		want []entry
	}{
		{"empty", nil, a1, []entry{a1}},
		{"same phase replaces", []entry{a1}, a2, []entry{a2}},
		{"new phase appends", []entry{a1}, b1, []entry{a1, b1}},
		{"only the tail is replaced", []entry{a1, b1}, a2, []entry{a1, b1, a2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := enqueue(append([]entry(nil), tc.q...), tc.e); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("enqueue = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNext(t *testing.T) {
	now := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	a1, a2, b1 := entry{phase: "A", data: "a1"}, entry{phase: "A", data: "a2"}, entry{phase: "B", data: "b1"}
	tests := []struct {
		name     string
		q        []entry
		w        written
		interval time.Duration
		wantQ    []entry
		wantE    entry
		wantWait time.Duration
		wantOK   bool
	}{
		{name: "nothing queued", wantOK: false},
		{name: "first write is immediate", q: []entry{a1}, interval: time.Second, wantQ: []entry{a1}, wantE: a1, wantOK: true},
		{name: "new phase is immediate", q: []entry{b1}, w: written{"A", "a1", now}, interval: time.Second,
			wantQ: []entry{b1}, wantE: b1, wantOK: true},
		{name: "progress waits for the interval", q: []entry{a2}, w: written{"A", "a1", now.Add(-300 * time.Millisecond)}, interval: time.Second,
			wantQ: []entry{a2}, wantE: a2, wantWait: 700 * time.Millisecond, wantOK: true},
		{name: "progress after the interval is immediate", q: []entry{a2}, w: written{"A", "a1", now.Add(-2 * time.Second)}, interval: time.Second,
			wantQ: []entry{a2}, wantE: a2, wantOK: true},
		{name: "closing flushes progress at once", q: []entry{a2}, w: written{"A", "a1", now}, interval: 0,
			wantQ: []entry{a2}, wantE: a2, wantOK: true},
		{name: "progress superseded by a newer phase is dropped", q: []entry{a2, b1}, w: written{"A", "a1", now}, interval: time.Second,
			wantQ: []entry{b1}, wantE: b1, wantOK: true},
		{name: "an unwritten phase is kept before a newer one", q: []entry{a1, b1}, w: written{"Z", "z", now}, interval: time.Second,
			wantQ: []entry{a1, b1}, wantE: a1, wantOK: true},
		{name: "what is written is not written again", q: []entry{a1}, w: written{"A", "a1", now}, interval: time.Second,
			wantQ: []entry{}, wantOK: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, e, wait, ok := next(tc.q, tc.w, now, tc.interval)
			if ok != tc.wantOK || e != tc.wantE || wait != tc.wantWait || (len(q) != 0 || len(tc.wantQ) != 0) && !reflect.DeepEqual(q, tc.wantQ) {
				t.Errorf("next = %v, %v, %v, %v; want %v, %v, %v, %v", q, e, wait, ok, tc.wantQ, tc.wantE, tc.wantWait, tc.wantOK)
			}
		})
	}
}

func TestDrop(t *testing.T) {
	a1, a2, b1 := entry{phase: "A", data: "a1"}, entry{phase: "A", data: "a2"}, entry{phase: "B", data: "b1"}
	tests := []struct {
		name    string
		q       []entry
		written entry
		want    []entry
	}{
		{"written head goes", []entry{a1, b1}, a1, []entry{b1}},
		{"replaced meanwhile stays", []entry{a2}, a1, []entry{a2}},
		{"empty", nil, a1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := drop(tc.q, tc.written); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("drop = %v, want %v", got, tc.want)
			}
		})
	}
}

// recorder is a Sink that keeps every apply and fails the first failures of them.
type recorder struct {
	mu       sync.Mutex
	failures int
	applies  []map[string]string
}

func (r *recorder) Apply(_ context.Context, data map[string]string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failures > 0 {
		r.failures--
		return errors.New("API server unavailable")
	}
	r.applies = append(r.applies, data)
	return nil
}

func (r *recorder) phases(key string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, a := range r.applies {
		var s struct{ Phase string }
		if err := json.Unmarshal([]byte(a[key]), &s); err == nil && s.Phase != "" {
			out = append(out, s.Phase)
		}
	}
	return out
}

type status struct {
	Phase string `json:"phase"`
	Done  int    `json:"done"`
}

// TestReporterWritesEveryPhase: phases queued faster than they are written all reach the sink,
// in order, through failing writes; the last write is the latest status.
func TestReporterWritesEveryPhase(t *testing.T) {
	sink := &recorder{failures: 2}
	var logs []string
	var logMu sync.Mutex
	r, err := New(Options{Command: "snapshot", Sink: sink, MaxBackoff: 10 * time.Millisecond, Log: func(f string, a ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		logs = append(logs, f)
	}})
	if err != nil {
		t.Fatal(err)
	}
	r.Update("Starting", status{"Starting", 0})
	r.Update("Waiting", status{"Waiting", 0})
	r.Update("Waiting", status{"Waiting", 1})
	r.Update("Completed", status{"Completed", 2})
	r.Close(context.Background())

	got := sink.phases("snapshot")
	for i := 1; i < len(got); i++ {
		if got[i] == got[i-1] && got[i] != "Waiting" {
			t.Errorf("phase %s written twice: %v", got[i], got)
		}
	}
	if want := []string{"Starting", "Waiting", "Completed"}; !reflect.DeepEqual(compact(got), want) {
		t.Errorf("phases written = %v, want %v", got, want)
	}
	last := sink.applies[len(sink.applies)-1]
	if last["snapshot"] != `{"phase":"Completed","done":2}` || len(last) != 1 {
		t.Errorf("last apply = %v", last)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if len(logs) != 2 {
		t.Errorf("logged %d failures, want 2: %v", len(logs), logs)
	}
}

func compact(s []string) []string {
	var out []string
	for _, v := range s {
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

func TestReporterResult(t *testing.T) {
	sink := &recorder{failures: 1}
	r, err := New(Options{Command: "pause", Sink: sink, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.Update("Stopped", status{"Stopped", 3})
	if err := r.Result(context.Background(), map[string]int{"stores": 3}); err != nil {
		t.Fatal(err)
	}
	last := sink.applies[len(sink.applies)-1]
	want := map[string]string{"pause": `{"phase":"Stopped","done":3}`, "pause.result": `{"stores":3}`}
	if !reflect.DeepEqual(last, want) {
		t.Errorf("result apply = %v, want %v", last, want)
	}
	r.Update("Late", status{"Late", 0}) // after Result: queued, never written, never blocks
	if n := len(sink.phases("pause")); sink.phases("pause")[n-1] != "Stopped" {
		t.Errorf("a status was written after the result: %v", sink.phases("pause"))
	}
}

func TestReporterResultGivesUp(t *testing.T) {
	sink := &recorder{failures: 1 << 30}
	r, err := New(Options{Command: "clean", Sink: sink, MaxBackoff: time.Millisecond, ResultTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.Update("Completed", status{"Completed", 1})
	err = r.Result(context.Background(), struct{}{})
	if err == nil || !strings.Contains(err.Error(), "write the clean result to the member's status.steps") || !strings.Contains(err.Error(), "API server unavailable") {
		t.Fatalf("Result = %v, want a bounded failure naming the writes' own error", err)
	}
}

func TestCloseGivesUpWithContext(t *testing.T) {
	r, err := New(Options{Command: "clean", Sink: &recorder{failures: 1 << 30}, MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.Update("Failed", status{"Failed", 0})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r.Close(ctx) // returns although no write ever succeeds
}

func TestNilReporter(t *testing.T) {
	var r *Reporter
	r.Update("Starting", status{})
	r.Close(context.Background())
	if err := r.Result(context.Background(), struct{}{}); err != nil {
		t.Fatal(err)
	}
}

func TestNewNeedsCommandAndSink(t *testing.T) {
	if _, err := New(Options{Command: "pause"}); err == nil {
		t.Error("New without a sink succeeded")
	}
	if _, err := New(Options{Sink: &recorder{}}); err == nil {
		t.Error("New without a command succeeded")
	}
}

// TestReporterFlush: Flush writes progress at once (the interval does not hold it back) and
// returns only once it is written, through failing writes; a write that never succeeds ends
// Flush with its context.
func TestReporterFlush(t *testing.T) {
	sink := &recorder{failures: 2}
	r, err := New(Options{Command: "pause", Sink: sink, MinInterval: time.Hour, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	if err := r.Flush(context.Background()); err != nil {
		t.Fatalf("Flush with nothing queued = %v", err)
	}
	r.Update("Starting", status{"Starting", 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sink.phases("pause"); !reflect.DeepEqual(got, []string{"Starting"}) {
		t.Errorf("phases written by Flush = %v, want Starting", got)
	}
	r.Update("Starting", status{"Starting", 2}) // progress an hour's interval would hold back
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	last := sink.applies[len(sink.applies)-1]["pause"]
	sink.mu.Unlock()
	if want := `{"phase":"Starting","done":2}`; last != want {
		t.Errorf("last write after Flush = %s, want %s", last, want)
	}

	r2, err := New(Options{Command: "pause", Sink: &recorder{failures: 1 << 30}, MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		r2.Close(ctx)
	}()
	r2.Update("Starting", status{"Starting", 0})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if err := r2.Flush(ctx2); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Flush against a failing sink = %v, want the context's deadline", err)
	}
	var nilReporter *Reporter
	if err := nilReporter.Flush(context.Background()); err != nil {
		t.Errorf("nil Flush = %v", err)
	}
}

// stuckSink is a Sink whose first write hangs until its context ends, as a write to an API
// server that takes its time; it records how that context ended.
type stuckSink struct {
	recorder
	held  chan struct{}
	ended chan error
	once  sync.Once
}

func (s *stuckSink) Apply(ctx context.Context, data map[string]string) error {
	first := false
	s.once.Do(func() { first = true })
	if !first {
		return s.recorder.Apply(ctx, data)
	}
	close(s.held)
	<-ctx.Done()
	s.ended <- ctx.Err()
	return ctx.Err()
}

// TestResultWaitsForTheWriteInFlight: Result never gives up on a status write in flight to send
// the result. An API server goes on with a write its client abandoned, and a status it stores
// after the result would take the result away (the crash suite saw a restore-volumes Job
// succeed with no result in its report). The abandoned write here runs to its own attempt
// timeout; the result is written after it.
func TestResultWaitsForTheWriteInFlight(t *testing.T) {
	sink := &stuckSink{held: make(chan struct{}), ended: make(chan error, 1)}
	r, err := New(Options{Command: "restore-volumes", Sink: sink, AttemptTimeout: time.Second, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.Update("Completed", status{"Completed", 3})
	<-sink.held
	if err := r.Result(context.Background(), map[string]int{"volumes": 3}); err != nil {
		t.Fatal(err)
	}
	if err := <-sink.ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the status write in flight ended with %v: Result cancelled it, and the API server may store it after the result", err)
	}
	want := map[string]string{"restore-volumes": `{"phase":"Completed","done":3}`, "restore-volumes.result": `{"volumes":3}`}
	if len(sink.applies) != 1 || !reflect.DeepEqual(sink.applies[0], want) {
		t.Errorf("writes after the one in flight = %v, want only the result %v", sink.applies, want)
	}
}
