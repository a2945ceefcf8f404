package report

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
)

// MemberStep is the Sink of one step's entry in its member's status.steps: the entry named
// after the step, server-side applied under the field manager FieldManager(step) (the write
// with the result under FieldManager(ResultKey(step))), so that each step owns its entry alone
// and no two writers share a field.
type MemberStep struct {
	client    dynamic.ResourceInterface
	gvk       schema.GroupVersionKind
	namespace string
	member    string
	step      string
	// checked is set once a status write of this run looked for an earlier run's result.
	checked bool
}

// NewMemberStep returns the Sink of step's entry in the status of the member namespace/name
// of kind gvk (resource its plural) through cfg.
func NewMemberStep(cfg *rest.Config, gvk schema.GroupVersionKind, resource, namespace, name, step string) (*MemberStep, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = FieldManager(step)
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultAttemptTimeout
	}
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for member %s/%s: %w", namespace, name, err)
	}
	return &MemberStep{client: c.Resource(gvk.GroupVersion().WithResource(resource)).Namespace(namespace), gvk: gvk,
		namespace: namespace, member: name, step: step}, nil
}

// String names the entry for logs.
func (m *MemberStep) String() string {
	return fmt.Sprintf("%s %s/%s status.steps[%s]", m.gvk.Kind, m.namespace, m.member, m.step)
}

// Apply writes the step's status document (data[step]) and final summary (data[step.result])
// as its entry. Every status field the entry held and this apply leaves out is removed: the
// step states its whole status each time. The result has a field manager of its own, so that a
// status write the API server stores after it (sent before, its client gone) changes the status
// fields only; a re-run's first status write that finds an earlier run's result removes it.
// One writer at a time: the Reporter's loop.
func (m *MemberStep) Apply(ctx context.Context, data map[string]string) error {
	entry, err := StepEntry(m.step, data[m.step], data[ResultKey(m.step)])
	if err != nil {
		return err
	}
	manager := FieldManager(m.step)
	if entry.Result != nil {
		manager = FieldManager(ResultKey(m.step))
	}
	stored, err := m.apply(ctx, entry, manager)
	if err != nil || entry.Result != nil || m.checked {
		return err
	}
	m.checked = true
	if !hasResult(stored, m.step) {
		return nil
	}
	// An earlier run's result: the result's manager states the entry without one.
	_, err = m.apply(ctx, dpv1alpha1.StepReport{Name: m.step}, FieldManager(ResultKey(m.step)))
	return err
}

func (m *MemberStep) apply(ctx context.Context, entry dpv1alpha1.StepReport, manager string) (*unstructured.Unstructured, error) {
	// Not through JSON into map[string]any: a TSO does not survive a float64.
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&entry)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"steps": []any{fields}}}}
	u.SetGroupVersionKind(m.gvk)
	u.SetName(m.member)
	u.SetNamespace(m.namespace)
	stored, err := m.client.ApplyStatus(ctx, m.member, u, metav1.ApplyOptions{FieldManager: manager, Force: true})
	if err != nil {
		return nil, fmt.Errorf("apply %s: %w", m, err)
	}
	return stored, nil
}

// hasResult says whether u's status.steps entry named step holds a result.
func hasResult(u *unstructured.Unstructured, step string) bool {
	steps, _, _ := unstructured.NestedSlice(u.Object, "status", "steps")
	for _, s := range steps {
		if e, ok := s.(map[string]any); ok && e["name"] == step {
			_, ok := e["result"]
			return ok
		}
	}
	return false
}

// stepDocument is what every step's status document may say (each says a part of it).
type stepDocument struct {
	Phase       string    `json:"phase"`
	Error       string    `json:"error"`
	BackupTS    uint64    `json:"backupTS"`
	ResolvedTS  uint64    `json:"resolvedTS"`
	Attempt     int32     `json:"attempt"`
	Regions     int32     `json:"regions"`
	Stores      int32     `json:"stores"`
	Since       time.Time `json:"since"`
	GCPausedAt  time.Time `json:"gcPausedAt"`
	LiftedAt    time.Time `json:"liftedAt"`
	ReadyAt     time.Time `json:"readyAt"`
	BackupTSAt  time.Time `json:"backupTSAt"`
	StartedAt   time.Time `json:"startedAt"`
	CompletedAt time.Time `json:"completedAt"`
	Done        int64     `json:"done"`
	Total       int64     `json:"total"`
	Percent     float64   `json:"percent"`
	ProgressAt  time.Time `json:"progressAt"`
	Deleted     int32     `json:"deleted"`
	Volumes     int32     `json:"volumes"`
	Slowest     float64   `json:"slowestStartSeconds"`
	Sized       int32     `json:"sized"`
	SizedBytes  int64     `json:"sizedBytes"`
	Settled     bool      `json:"settled"`
	// The pause's identity (and the lift's).
	ServiceSafePoint string                          `json:"serviceSafePoint"`
	Schedulers       []string                        `json:"pausedSchedulers"`
	ScheduleConfig   []dpv1alpha1.ScheduleConfigItem `json:"scheduleConfig"`
	// Backup is restore-volumes' report of the backup it restores.
	Backup json.RawMessage `json:"backup"`
}

// StepEntry turns a step's status document and its final summary (either may be empty) into
// its member's step report.
func StepEntry(step, status, result string) (dpv1alpha1.StepReport, error) {
	e := dpv1alpha1.StepReport{Name: step}
	if status != "" {
		var d stepDocument
		if err := json.Unmarshal([]byte(status), &d); err != nil {
			return e, fmt.Errorf("the %s status document: %w", step, err)
		}
		e.Phase, e.Error, e.BackupTS, e.Stores = d.Phase, cutError(d.Error), d.BackupTS, d.Stores
		e.Done, e.Total, e.Percent, e.Deleted, e.Volumes = d.Done, d.Total, d.Percent, d.Deleted, d.Volumes
		e.SlowestStartSeconds, e.Sized, e.SizedBytes, e.Settled = d.Slowest, d.Sized, d.SizedBytes, d.Settled
		e.ResolvedTS, e.Attempt, e.Regions = d.ResolvedTS, d.Attempt, d.Regions
		e.Since, e.GCPausedAt, e.LiftedAt, e.ReadyAt = micro(d.Since), micro(d.GCPausedAt), micro(d.LiftedAt), micro(d.ReadyAt)
		e.BackupTSAt, e.StartedAt, e.CompletedAt = micro(d.BackupTSAt), micro(d.StartedAt), micro(d.CompletedAt)
		e.ProgressAt = micro(d.ProgressAt)
		e.ServiceSafePoint, e.PausedSchedulers, e.ScheduleConfig = d.ServiceSafePoint, d.Schedulers, d.ScheduleConfig
		if len(d.Backup) > 0 && string(d.Backup) != "null" {
			e.Backup = &runtime.RawExtension{Raw: d.Backup}
		}
	}
	if result != "" {
		if !json.Valid([]byte(result)) {
			return e, fmt.Errorf("the %s result is not JSON", step)
		}
		e.Result = &runtime.RawExtension{Raw: []byte(result)}
	}
	return e, nil
}

// Entries turns the keys steps write through a Sink (each step's status document under its
// name, its summary under <step>.result) into their step reports, one per step.
func Entries(data map[string]string) ([]dpv1alpha1.StepReport, error) {
	var out []dpv1alpha1.StepReport
	for k, v := range data {
		step, isResult := strings.CutSuffix(k, ResultSuffix)
		if isResult {
			if _, hasStatus := data[step]; hasStatus {
				continue // taken with its status
			}
			v = ""
		}
		e, err := StepEntry(step, v, data[ResultKey(step)])
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func micro(t time.Time) *metav1.MicroTime {
	if t.IsZero() {
		return nil
	}
	m := metav1.NewMicroTime(t.UTC())
	return &m
}

// CutSuffix ends an error cut to the API's bound.
const CutSuffix = " … (cut: see the step's log)"

// cutError is err within dpv1alpha1.MaxStepError bytes, cut at a rune boundary: a longer one
// (a failure naming thousands of volumes) would make the API server refuse the whole report.
func cutError(err string) string {
	if len(err) <= dpv1alpha1.MaxStepError {
		return err
	}
	n := dpv1alpha1.MaxStepError - len(CutSuffix)
	for n > 0 && !utf8.RuneStart(err[n]) {
		n--
	}
	return err[:n] + CutSuffix
}
