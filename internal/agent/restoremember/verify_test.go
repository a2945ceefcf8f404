package restoremember

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/policy"
	brreport "github.com/fedbr/fedbr/internal/br/report"
)

// TestPlanVerify: the data member of a restore whose template asks for verify runs the verify
// step once Complete, against its TidbCluster's PD, with the restored ts and a bound of its own
// (no other clock times a Complete member); the step's outcome is Checked, judged once, and a
// failed check never fails the member.
func TestPlanVerify(t *testing.T) {
	done := []func(*dpv1alpha1.VolumeRestoreMember){
		rcond(dpv1alpha1.RestoreMemberTikvCompleteCondition, dpv1alpha1.RestoreMemberTiKVStartedReason),
		rcond(dpv1alpha1.RestoreMemberDataCompleteCondition, dpv1alpha1.RestoreMemberDataRestoredReason),
		rcond(dpv1alpha1.RestoreMemberCompleteCondition, dpv1alpha1.RestoreMemberRecoveryModeOffReason),
	}
	verify := func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.Template.Verify = true }
	data := func(m *dpv1alpha1.VolumeRestoreMember) {
		m.Spec.DataMember, m.Spec.ResolvedTS, m.Status.RestoredTS = true, "42", "42"
	}
	member := func(mut ...func(*dpv1alpha1.VolumeRestoreMember)) *dpv1alpha1.VolumeRestoreMember {
		return rmember(dpv1alpha1.RestoreMemberRestoreFinish, append(append([]func(*dpv1alpha1.VolumeRestoreMember){}, done...), mut...)...)
	}
	serving := storesUp(targetTC(2, false), 2)
	reported := func(phase, errText, result string) func(*Observed) {
		return func(o *Observed) {
			data := map[string]string{job.StepVerify: `{"phase":"` + phase + `","error":"` + errText + `"}`}
			if result != "" {
				data[brreport.ResultKey(job.StepVerify)] = result
			}
			o.Report = rreport(data)
		}
	}
	verifyJob := func(p job.Phase) func(*Observed) {
		return func(o *Observed) {
			o.Verify = job.State{Name: "fed-r1-verify", Phase: p, Message: "BackoffLimitExceeded"}
		}
	}
	userCheck := func(m *dpv1alpha1.VolumeRestoreMember) {
		m.Spec.Template.Check = &fedv1alpha1.RestoreCheck{Image: "example.com/sql-checksum:1", Command: []string{"/check"}, Args: []string{"--table", "bank"},
			EnvFromSecret: "tidb-check"}
	}
	checkJob := func(p job.Phase) func(*Observed) {
		return func(o *Observed) { o.Check = job.State{Name: "fed-r1-check", Phase: p, Reason: "BackoffLimitExceeded"} }
	}
	passed := `{"checks":[{"name":"every TiKV store is Up"},{"name":"the regions tile the key space"}],"stores":2,"regions":7,"passed":true}`
	checked := func(m *dpv1alpha1.VolumeRestoreMember) {
		m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: dpv1alpha1.RestoreMemberCheckedCondition,
			Status: metav1.ConditionFalse, Reason: dpv1alpha1.RestoreMemberVerificationFailedReason, LastTransitionTime: metav1.NewTime(t0)})
	}
	for _, tt := range []struct {
		name string
		o    Observed
		want rwant
	}{
		{
			name: "without verify: a Complete member runs nothing",
			o:    robs(member(data), serving),
			want: rwant{phase: PhaseComplete},
		},
		{
			name: "not the data member: the checks read the whole cluster's PD once, from the data member",
			o:    robs(member(verify), serving),
			want: rwant{phase: PhaseComplete},
		},
		{
			name: "the data member, Complete: the verify step against its PD, with the restored ts and a deadline of its own",
			o:    robs(member(verify, data), serving),
			want: rwant{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhaseComplete, check: func(t *testing.T, r Result) {
				j := r.Actions[1].Job
				c := j.Spec.Template.Spec.Containers[0]
				want := "br verify --pd http://pd:2379 --wait 10m --member fed-r1 --commit-ts 42"
				if got := strings.Join(c.Args, " "); got != want {
					t.Errorf("args %q, want %q", got, want)
				}
				if j.Labels[job.LabelStep] != job.StepVerify {
					t.Errorf("step label %q", j.Labels[job.LabelStep])
				}
				if j.Spec.ActiveDeadlineSeconds == nil || *j.Spec.ActiveDeadlineSeconds != int64(30*60) {
					t.Errorf("deadline %v, want 30m: the restore waits for its verdict", j.Spec.ActiveDeadlineSeconds)
				}
				if j.Spec.BackoffLimit == nil || *j.Spec.BackoffLimit != 0 {
					t.Errorf("backoffLimit %v, want 0: the step waits for the checks itself", j.Spec.BackoffLimit)
				}
			}},
		},
		{
			name: "a TLS cluster: the step mounts its client secret",
			o: robs(member(verify, data), func() *pcv1alpha1.TidbCluster {
				tc := storesUp(targetTC(2, false), 2)
				tc.Spec.TLSCluster = &pcv1alpha1.TLSCluster{Enabled: true}
				return tc
			}()),
			want: rwant{actions: []ActionKind{EnsureServiceAccount, CreateJob}, check: func(t *testing.T, r Result) {
				checkClusterTLS(t, r.Actions[1].Job.Spec.Template.Spec)
			}},
		},
		{
			name: "the member that restored the data without spec.dataMember (the manager was down until every TiKV was up): it checks",
			o:    robs(member(verify, func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.ResolvedTS, m.Status.RestoredTS = "42", "42" }), serving),
			want: rwant{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhaseComplete},
		},
		{
			name: "running: nothing more",
			o:    robs(member(verify, data), serving, verifyJob(job.Active), reported(brreport.PhaseChecking, "", "")),
			want: rwant{phase: PhaseComplete},
		},
		{
			name: "passed: Checked True, naming what was checked",
			o:    robs(member(verify, data), serving, verifyJob(job.Succeeded), reported(brreport.PhaseCompleted, "", passed)),
			want: rwant{true: []string{dpv1alpha1.RestoreMemberCheckedCondition},
				reason: map[string]string{dpv1alpha1.RestoreMemberCheckedCondition: dpv1alpha1.RestoreMemberChecksPassedReason},
				msg:    "2 stores, 7 regions: every TiKV store is Up; the regions tile the key space", phase: PhaseComplete},
		},
		{
			name: "a passing report while the Job still runs (written by another who acts as the steps' account): no verdict yet",
			o:    robs(member(verify, data), serving, verifyJob(job.Active), reported(brreport.PhaseCompleted, "", passed)),
			want: rwant{phase: PhaseComplete, check: func(t *testing.T, r Result) {
				if findCondition(r.Status.Conditions, dpv1alpha1.RestoreMemberCheckedCondition) != nil {
					t.Error("a report alone judged the checks")
				}
			}},
		},
		{
			name: "a passing report whose Job is gone: not a pass",
			o:    robs(member(verify, data), serving, reported(brreport.PhaseCompleted, "", passed)),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberCheckedCondition: dpv1alpha1.RestoreMemberVerificationFailedReason},
				msg: "its Job is gone before its success was seen"},
		},
		{
			name: "a passing report, the Job failed: not a pass",
			o:    robs(member(verify, data), serving, verifyJob(job.Failed), reported(brreport.PhaseCompleted, "", passed)),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberCheckedCondition: dpv1alpha1.RestoreMemberVerificationFailedReason}},
		},
		{
			name: "a check failed: Checked False naming it, the member stays Complete",
			o: robs(member(verify, data), serving, verifyJob(job.Failed),
				reported(brreport.PhaseFailed, "the restored cluster failed verification:\\nevery TiKV store is Up: store 5 is Down", "")),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberCheckedCondition: dpv1alpha1.RestoreMemberVerificationFailedReason},
				msg: "store 5 is Down", phase: PhaseComplete, check: func(t *testing.T, r Result) {
					if findCondition(r.Status.Conditions, dpv1alpha1.RestoreMemberFailedCondition) != nil {
						t.Error("a failed check failed the member")
					}
				}},
		},
		{
			name: "the Job failed without a report (past its deadline): Checked False with the Job's reason",
			o:    robs(member(verify, data), serving, verifyJob(job.Failed)),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberCheckedCondition: dpv1alpha1.RestoreMemberVerificationFailedReason},
				msg: "BackoffLimitExceeded"},
		},
		{
			name: "succeeded with a result that did not pass: refused as a pass",
			o: robs(member(verify, data), serving, verifyJob(job.Succeeded),
				reported(brreport.PhaseCompleted, "", `{"checks":[{"name":"x","error":"y"}],"passed":false}`)),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberCheckedCondition: dpv1alpha1.RestoreMemberVerificationFailedReason},
				msg: "no passed checks"},
		},
		{
			name: "judged once: a later report changes nothing, and no Job is started again",
			o:    robs(member(verify, data, checked), serving, reported(brreport.PhaseCompleted, "", passed)),
			want: rwant{phase: PhaseComplete, reason: map[string]string{dpv1alpha1.RestoreMemberCheckedCondition: dpv1alpha1.RestoreMemberVerificationFailedReason}},
		},
		{
			name: "with the user's check: the built-in checks passed, the check's Job starts, no verdict yet",
			o:    robs(member(verify, data, userCheck), serving, verifyJob(job.Succeeded), reported(brreport.PhaseCompleted, "", passed)),
			want: rwant{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhaseComplete, check: func(t *testing.T, r Result) {
				if findCondition(r.Status.Conditions, dpv1alpha1.RestoreMemberCheckedCondition) != nil {
					t.Error("Checked set before the user's check ran")
				}
				j := r.Actions[1].Job
				ps := j.Spec.Template.Spec
				c := ps.Containers[0]
				if j.Labels[job.LabelStep] != job.StepCheck || c.Image != "example.com/sql-checksum:1" ||
					strings.Join(c.Command, " ") != "/check" || strings.Join(c.Args, " ") != "--table bank" {
					t.Errorf("Job %s: step %q, image %q, command %v, args %v", j.Name, j.Labels[job.LabelStep], c.Image, c.Command, c.Args)
				}
				if ps.ServiceAccountName != "default" || ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
					t.Errorf("service account %q, automount %v: want default without a token", ps.ServiceAccountName, ps.AutomountServiceAccountToken)
				}
				if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != "tidb-check" {
					t.Errorf("envFrom %+v, want the Secret tidb-check", c.EnvFrom)
				}
				env := map[string]string{}
				for _, e := range c.Env {
					env[e.Name] = e.Value
				}
				if env[EnvCheckPD] != "http://pd:2379" || env[EnvCheckRestoredTS] != "42" || env[EnvCheckTCName] != "restored" || env[EnvCheckTCNamespace] != "dst" {
					t.Errorf("env %v", env)
				}
				for _, v := range ps.Volumes {
					if v.Secret != nil {
						t.Errorf("the user's check mounts Secret %s", v.Secret.SecretName)
					}
				}
				if j.Spec.ActiveDeadlineSeconds == nil || *j.Spec.ActiveDeadlineSeconds != 3600 || j.Spec.BackoffLimit == nil || *j.Spec.BackoffLimit != 0 {
					t.Errorf("deadline %v, backoffLimit %v: want 1h, 0", j.Spec.ActiveDeadlineSeconds, j.Spec.BackoffLimit)
				}
			}},
		},
		{
			name: "the user's check passed: Checked True, saying so",
			o:    robs(member(verify, data, userCheck), serving, verifyJob(job.Succeeded), reported(brreport.PhaseCompleted, "", passed), checkJob(job.Succeeded)),
			want: rwant{true: []string{dpv1alpha1.RestoreMemberCheckedCondition}, msg: "the user's check fed-r1-check passed", phase: PhaseComplete},
		},
		{
			name: "the user's check failed: Checked False with its Job's failure",
			o:    robs(member(verify, data, userCheck), serving, verifyJob(job.Succeeded), reported(brreport.PhaseCompleted, "", passed), checkJob(job.Failed)),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberCheckedCondition: dpv1alpha1.RestoreMemberVerificationFailedReason},
				msg: "the user's check failed: Job fed-r1-check failed"},
		},
		{
			name: "the user's check running: nothing more",
			o:    robs(member(verify, data, userCheck), serving, verifyJob(job.Succeeded), reported(brreport.PhaseCompleted, "", passed), checkJob(job.Active)),
			want: rwant{phase: PhaseComplete},
		},
		{
			name: "the built-in checks failed: the user's check never runs",
			o: robs(member(verify, data, userCheck), serving, verifyJob(job.Failed),
				reported(brreport.PhaseFailed, "store 5 is Down", "")),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberCheckedCondition: dpv1alpha1.RestoreMemberVerificationFailedReason}, msg: "store 5 is Down"},
		},
		{
			name: "the TidbCluster is gone: Checked False, no Job",
			o:    robs(member(verify, data), nil),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberCheckedCondition: dpv1alpha1.RestoreMemberVerificationFailedReason},
				msg: "could not run"},
		},
		{
			name: "the agent's default policy lets the user's check run: its pod has no identity",
			o: func() Observed {
				o := robs(member(verify, data, func(m *dpv1alpha1.VolumeRestoreMember) {
					m.Spec.Template.Check = &fedv1alpha1.RestoreCheck{Image: testEnv.Image}
				}), serving, verifyJob(job.Succeeded), reported(brreport.PhaseCompleted, "", passed))
				o.Policy = policy.Default(testEnv.Image, job.ServiceAccountName)
				return o
			}(),
			want: rwant{actions: []ActionKind{EnsureServiceAccount, CreateJob}},
		},
		{
			name: "a check pod the policy refuses: Checked False naming the rule, never the warm-up's condition",
			o: func() Observed {
				o := robs(member(verify, data, userCheck), serving, verifyJob(job.Succeeded), reported(brreport.PhaseCompleted, "", passed))
				o.Policy = policy.Default(testEnv.Image, job.ServiceAccountName)
				return o
			}(),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberCheckedCondition: dpv1alpha1.RestoreMemberVerificationFailedReason},
				msg: "the check step was not started", check: func(t *testing.T, r Result) {
					if findCondition(r.Status.Conditions, dpv1alpha1.RestoreMemberWarmUpCompleteCondition) != nil {
						t.Error("a refused check set WarmUpComplete")
					}
				}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rcheck(t, Plan(tt.o, t0), tt.want)
		})
	}
}
