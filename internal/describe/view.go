// Package describe builds one view of a VolumeBackup, VolumeRestore or VolumeBackupSchedule
// across the control plane and every data plane it reaches — the operation's status, each
// member's phase, conditions, step reports and progress, the step Jobs and pods, recent events —
// and gathers the step pods' logs. `fedbr describe` and `fedbr logs` print them.
//
// Gathering reads only (get and list); rendering is a pure function of the view, so what a
// user sees is table-tested without an API server.
package describe

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
)

// View is what `fedbr describe` prints.
type View struct {
	Kind      string
	Namespace string
	Name      string
	Phase     string
	// Final says the operation has reached a phase it does not leave (Complete, Failed,
	// Cleaned); `describe --watch` stops there.
	Final bool
	// Fields are the operation's summary lines (commit ts, sizes, times, the pause window), in
	// order; empty values are left out when rendered.
	Fields     []Field
	Conditions []metav1.Condition
	Events     []Event
	// Members are the operation's parts in the data planes, in spec.clusters order.
	Members []Member
	// Backups are a schedule's VolumeBackups, newest first.
	Backups []ScheduledBackup
}

// Field is one summary line.
type Field struct{ Key, Value string }

// Member is one data plane's part of the operation.
type Member struct {
	Plane     string
	Namespace string
	Name      string
	// Problem says why the member could not be read (plane unreachable, not created yet,
	// another operation's); the rest is empty then.
	Problem    string
	Phase      string
	Fields     []Field
	Conditions []metav1.Condition
	Steps      []dpv1alpha1.StepReport
	Jobs       []Job
	Events     []Event
	// Notes say what could not be read about an existing member (its Jobs, pods or events).
	Notes []string
	// Observed are the observations of a step's percent so far, by step name (Observer), for
	// the estimate of the time left.
	Observed map[string][]Observation
	// ok says the member was read.
	ok bool
}

// Job is one step Job and its pods.
type Job struct {
	Name   string
	Step   string
	Status string // Active, Succeeded, Failed (with the reason)
	Pods   []Pod
}

// Pod is one step pod.
type Pod struct {
	Name     string
	Phase    string
	Node     string
	Restarts int32
	// Exit is the container's last termination (exit code and reason), if any.
	Exit string
}

// Event is one Kubernetes event.
type Event struct {
	Time    time.Time
	Type    string
	Reason  string
	Object  string
	Message string
	Count   int32
}

// ScheduledBackup is one line of a schedule's backup list.
type ScheduledBackup struct {
	Name      string
	Phase     string
	Created   time.Time
	CommitTs  string
	Size      string
	TimeTaken string
}
