package job

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// Phase is how far a Job got, as its status says.
type Phase string

// Job phases.
const (
	// Absent: no such Job.
	Absent Phase = "Absent"
	// Active: created, not finished.
	Active Phase = "Active"
	// Succeeded: the step exited 0.
	Succeeded Phase = "Succeeded"
	// Failed: the Job failed (exit status, deadline, retries exhausted).
	Failed Phase = "Failed"
)

// Job reasons the planners tell apart.
const (
	// ReasonDeadlineExceeded is the Job condition reason when activeDeadlineSeconds passed.
	ReasonDeadlineExceeded = "DeadlineExceeded"
	// ReasonBackoffLimitExceeded is the Job condition reason when every retry failed.
	ReasonBackoffLimitExceeded = "BackoffLimitExceeded"
)

// State is what the planners know of one Job.
type State struct {
	Name  string
	Phase Phase
	// Reason and Message are the Failed condition's (or Complete's).
	Reason  string
	Message string
	// Suspended says the agent suspended the Job (how a pause is stopped).
	Suspended bool
	// Deleting says the Job is being deleted.
	Deleting bool
	// Active is the number of the Job's pods still running.
	Active int32
	// Started and Finished are the Job's start and completion (zero when unknown).
	Started  time.Time
	Finished time.Time
}

// Exists says a Job was observed.
func (s State) Exists() bool { return s.Phase != Absent && s.Phase != "" }

// Done says the Job will not run any more.
func (s State) Done() bool { return s.Phase == Succeeded || s.Phase == Failed }

// FailureText describes a failed Job for a condition message.
func (s State) FailureText() string {
	switch {
	case s.Reason == ReasonDeadlineExceeded:
		return fmt.Sprintf("Job %s ran past its deadline (activeDeadlineSeconds) and was stopped", s.Name)
	case s.Message != "":
		return fmt.Sprintf("Job %s failed: %s: %s", s.Name, s.Reason, s.Message)
	case s.Reason != "":
		return fmt.Sprintf("Job %s failed: %s", s.Name, s.Reason)
	}
	return fmt.Sprintf("Job %s failed", s.Name)
}

// StateOf reads a Job's state; nil is Absent.
func StateOf(j *batchv1.Job) State {
	if j == nil {
		return State{Phase: Absent}
	}
	s := State{Name: j.Name, Phase: Active, Suspended: j.Spec.Suspend != nil && *j.Spec.Suspend,
		Deleting: j.DeletionTimestamp != nil, Active: j.Status.Active}
	if j.Status.StartTime != nil {
		s.Started = j.Status.StartTime.Time
	}
	if j.Status.CompletionTime != nil {
		s.Finished = j.Status.CompletionTime.Time
	}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			s.Phase, s.Reason, s.Message = Succeeded, c.Reason, c.Message
			if s.Finished.IsZero() {
				s.Finished = c.LastTransitionTime.Time
			}
		case batchv1.JobFailed:
			s.Phase, s.Reason, s.Message = Failed, c.Reason, c.Message
			s.Finished = c.LastTransitionTime.Time
		}
	}
	return s
}
