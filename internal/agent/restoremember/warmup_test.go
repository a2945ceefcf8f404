package restoremember

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	brreport "github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/podsecurity"
)

// mustResult is restore-volumes' result as its report carries it.
func mustResult(t *testing.T, res restorevolumes.Result) string {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPlanWarmup(t *testing.T) {
	warm := func(mode fedv1alpha1.RestoreWarmupMode, strategy fedv1alpha1.RestoreWarmupStrategy) func(*dpv1alpha1.VolumeRestoreMember) {
		return func(m *dpv1alpha1.VolumeRestoreMember) {
			m.Spec.Template.Warmup, m.Spec.Template.WarmupStrategy = mode, strategy
		}
	}
	volumesIn := rcond(dpv1alpha1.RestoreMemberVolumeCompleteCondition, dpv1alpha1.RestoreMemberVolumesRestoredReason)
	restored := func(o *Observed) { o.RestoreMeta = record(t) }
	w0, w1 := WarmupJobName("fed-r1", 0), WarmupJobName("fed-r1", 1)
	jobs := func(states map[string]job.Phase) func(*Observed) {
		return func(o *Observed) {
			o.Warmups = map[string]job.State{}
			for name, ph := range states {
				o.Warmups[name] = job.State{Name: name, Phase: ph, Message: "reading block 42: input/output error"}
			}
		}
	}
	// An async warm-up's member completes before its warm-up: no WarmUpComplete yet.
	complete := []func(*dpv1alpha1.VolumeRestoreMember){volumesIn, rcond(dpv1alpha1.RestoreMemberTikvCompleteCondition, dpv1alpha1.RestoreMemberTiKVStartedReason),
		rcond(dpv1alpha1.RestoreMemberCompleteCondition, dpv1alpha1.RestoreMemberRecoveryModeOffReason)}
	servingPods := func(ready bool) func(*Observed) {
		return func(o *Observed) {
			o.Pods = []TiKVPod{
				{Name: "restored-tikv-0", UID: "p0", Ready: ready, Node: "node-a", Claims: []string{"tikv-restored-tikv-0", "tikv-raft-restored-tikv-0"}},
				{Name: "restored-tikv-1", UID: "p1", Ready: true, Node: "node-b", Claims: []string{"tikv-restored-tikv-1", "tikv-raft-restored-tikv-1"}},
			}
		}
	}
	// args returns the warm-up Jobs' targets (the arguments after the report flags), by Job name.
	args := func(t *testing.T, r Result) map[string]string {
		out := map[string]string{}
		for _, a := range r.Actions {
			if a.Kind == CreateJob && a.Job.Labels[job.LabelStep] == job.StepWarmup {
				c := a.Job.Spec.Template.Spec.Containers[0]
				ord := strings.TrimPrefix(a.Job.Name, "fed-r1-warmup-")
				if want := "warmup --member fed-r1 --report-as warmup-" + ord; strings.Join(c.Args[:5], " ") != want {
					t.Errorf("Job %s runs %v, want %s …", a.Job.Name, c.Args, want)
				}
				out[a.Job.Name] = strings.Join(c.Args[5:], " ")
			}
		}
		return out
	}
	firstJob := func(t *testing.T, r Result) *batchv1.Job {
		for _, a := range r.Actions {
			if a.Kind == CreateJob {
				return a.Job
			}
		}
		t.Fatalf("no Job created: %v", r.Actions)
		return nil
	}
	ensure := []ActionKind{EnsureServiceAccount}
	const (
		data0 = "var/lib/fedbr-warmup/tikv-restored-tikv-0"
		raft0 = "var/lib/fedbr-warmup/tikv-raft-restored-tikv-0"
		data1 = "var/lib/fedbr-warmup/tikv-restored-tikv-1"
		raft1 = "var/lib/fedbr-warmup/tikv-raft-restored-tikv-1"
		cpDir = " --checkpoint-dir var/run/fedbr-warmup"
	)
	walReport := func(ordinal int, phase, errText, result string) func(*Observed) {
		return func(o *Observed) {
			data := map[string]string{job.WarmupKey(ordinal): fmt.Sprintf(`{"phase":%q,"error":%q}`, phase, errText)}
			if result != "" {
				data[brreport.ResultKey(job.WarmupKey(ordinal))] = result
			}
			o.Report = rreport(data)
		}
	}
	corruptResult := `{"complete":true,"wal":[{"path":"` + raft1 + `","files":3,"corruptions":[{"file":"` + raft1 + `/wal/000007.log","offset":32768,"reason":"checksum mismatch"}]}],"walCorruptions":1}`
	checkWAL := func(mode fedv1alpha1.RestoreWarmupMode) func(*dpv1alpha1.VolumeRestoreMember) {
		return warm(mode, fedv1alpha1.RestoreWarmupStrategyCheckWALOnly)
	}
	for _, tt := range []struct {
		name string
		o    Observed
		want rwant
	}{
		{
			name: "fs: every volume read by its files, in an unprivileged container (no namespace needs Pod Security privileged)",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupSync, fedv1alpha1.RestoreWarmupStrategyFs), volumesIn), targetTC(2, true), restored),
			want: rwant{actions: append(ensure, CreateJob, CreateJob), true: []string{dpv1alpha1.RestoreMemberWarmUpStartedCondition}, phase: PhaseVolumeComplete,
				check: func(t *testing.T, r Result) {
					got := args(t, r)
					for name, a := range map[string]string{
						w0: "--fs " + raft0 + " --wal " + raft0 + " --fs " + data0 + " --wal " + data0 + cpDir,
						w1: "--fs " + raft1 + " --wal " + raft1 + " --fs " + data1 + " --wal " + data1 + cpDir,
					} {
						if got[name] != a {
							t.Errorf("Job %s args %q, want %q", name, got[name], a)
						}
					}
					spec := firstJob(t, r).Spec.Template.Spec
					if sc := spec.Containers[0].SecurityContext; sc == nil || sc.Privileged != nil && *sc.Privileged {
						t.Errorf("an fs warm-up runs privileged: %+v", sc)
					}
					if err := podsecurity.Check(podsecurity.Restricted, &metav1.ObjectMeta{}, &spec); err != nil {
						t.Errorf("an fs warm-up pod is not restricted: %v", err)
					}
				}},
		},
		{
			name: "sync: one Job per TiKV member reads its claims before TiKV starts (hybrid: files of the data volume, devices of the others)",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupSync, ""), volumesIn), targetTC(2, true), restored),
			want: rwant{actions: append(ensure, CreateJob, CreateJob), true: []string{dpv1alpha1.RestoreMemberWarmUpStartedCondition}, phase: PhaseVolumeComplete,
				check: func(t *testing.T, r Result) {
					got := args(t, r)
					want := map[string]string{
						w0: "--block " + raft0 + " --wal " + raft0 + " --fs " + data0 + " --wal " + data0 + cpDir,
						w1: "--block " + raft1 + " --wal " + raft1 + " --fs " + data1 + " --wal " + data1 + cpDir,
					}
					for name, a := range want {
						if got[name] != a {
							t.Errorf("Job %s args %q, want %q", name, got[name], a)
						}
					}
					j := firstJob(t, r)
					spec := j.Spec.Template.Spec
					var claims []string
					for _, v := range spec.Volumes {
						if v.PersistentVolumeClaim != nil {
							claims = append(claims, v.PersistentVolumeClaim.ClaimName)
						}
					}
					if !slices.Equal(claims, []string{"tikv-raft-restored-tikv-0", "tikv-restored-tikv-0"}) {
						t.Errorf("Job %s mounts %v", j.Name, claims)
					}
					// The checkpoints live in an emptyDir (a volume's root is root's, the --fs pod
					// runs as non-root) that a restarted container keeps: restartPolicy OnFailure.
					if !hasEmptyDirAt(spec, WarmupCheckpointDir) || spec.RestartPolicy != corev1.RestartPolicyOnFailure {
						t.Errorf("checkpoint emptyDir at %s: %v, restartPolicy %s; want it and OnFailure", WarmupCheckpointDir, hasEmptyDirAt(spec, WarmupCheckpointDir), spec.RestartPolicy)
					}
					if sc := spec.Containers[0].SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
						t.Errorf("a block read needs a privileged container: %+v", sc)
					}
					if spec.NodeName != "" || spec.Containers[0].Image != "fedbr:test" || *j.Spec.BackoffLimit != 1 || spec.ServiceAccountName != job.ServiceAccountName {
						t.Errorf("node %q image %q backoff %d service account %q", spec.NodeName, spec.Containers[0].Image, *j.Spec.BackoffLimit, spec.ServiceAccountName)
					}
					aa := spec.Affinity
					if aa == nil || aa.PodAntiAffinity == nil || len(aa.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
						t.Fatalf("warm-up pods do not spread over nodes: %+v", aa)
					}
					term := aa.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
					sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
					if err != nil || !sel.Matches(labels.Set(j.Spec.Template.Labels)) || term.TopologyKey != corev1.LabelHostname {
						t.Errorf("anti-affinity %+v does not select the member's warm-up pods (%v) per node: %v", term, j.Spec.Template.Labels, err)
					}
					if j.Namespace != "dst" || len(j.OwnerReferences) != 1 || j.Labels[job.LabelMember] != "fed-r1" {
						t.Errorf("Job %s/%s owners %v labels %v", j.Namespace, j.Name, j.OwnerReferences, j.Labels)
					}
				}},
		},
		{
			name: "sync, fio: every volume's device, in the warm-up image",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupSync, fedv1alpha1.RestoreWarmupStrategyFio), volumesIn,
				func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.Template.WarmupImage = "warmer:1" }), targetTC(2, true), restored),
			want: rwant{actions: append(ensure, CreateJob, CreateJob), check: func(t *testing.T, r Result) {
				if a := args(t, r)[w0]; a != "--block "+raft0+" --wal "+raft0+" --block "+data0+" --wal "+data0+cpDir {
					t.Errorf("args %q", a)
				}
				if img := firstJob(t, r).Spec.Template.Spec.Containers[0].Image; img != "warmer:1" {
					t.Errorf("image %q", img)
				}
			}},
		},
		{
			name: "sync, fsr: only the volumes fast snapshot restore did not initialize",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupSync, fedv1alpha1.RestoreWarmupStrategyFsr), volumesIn), targetTC(2, true), restored),
			want: rwant{actions: append(ensure, CreateJob, CreateJob), check: func(t *testing.T, r Result) {
				if a := args(t, r)[w1]; a != "--block "+raft1+" --wal "+raft1+cpDir {
					t.Errorf("args %q", a)
				}
			}},
		},
		{
			name: "sync, fsr: a data volume restored without FSR (the region's quota was full) is read as hybrid reads it",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupSync, fedv1alpha1.RestoreWarmupStrategyFsr), volumesIn), targetTC(2, true), restored,
				func(o *Observed) {
					o.Report = rreport(map[string]string{brreport.ResultKey(job.StepRestoreVolumes): mustResult(t, restorevolumes.Result{Volumes: []restorevolumes.Volume{
						{Type: meta.DataDirType, VolumeID: "vol-new-vol-old-3-tikv", FastRestored: true},
						{Type: meta.DataDirType, VolumeID: "vol-new-vol-old-5-tikv", FastRestored: false},
					}})})
				}),
			want: rwant{actions: append(ensure, CreateJob, CreateJob), check: func(t *testing.T, r Result) {
				got := args(t, r)
				if a := got[w0]; a != "--block "+raft0+" --wal "+raft0+cpDir {
					t.Errorf("Job %s args %q: the fast-restored data volume is read", w0, a)
				}
				if a, want := got[w1], "--block "+raft1+" --wal "+raft1+" --fs "+data1+" --wal "+data1+cpDir; a != want {
					t.Errorf("Job %s args %q, want %q: the data volume restored without FSR is not read", w1, a, want)
				}
			}},
		},
		{
			name: "sync, running: TiKV waits",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupSync, ""), volumesIn), targetTC(2, true), restored,
				jobs(map[string]job.Phase{w0: job.Succeeded, w1: job.Active})),
			want: rwant{actions: nil, msg: "running: " + w1, phase: PhaseVolumeComplete},
		},
		{
			name: "sync, running: the condition says how much the Jobs read",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupSync, ""), volumesIn), targetTC(2, true), restored,
				jobs(map[string]job.Phase{w0: job.Active, w1: job.Active}), func(o *Observed) {
					o.Report = rreport(map[string]string{job.WarmupKey(0): `{"phase":"Reading","done":1048576,"total":2097152}`,
						job.WarmupKey(1): `{"phase":"Reading","done":0,"total":2097152}`})
				}),
			want: rwant{actions: nil, msg: "read 1Mi of 4Mi (25%)", phase: PhaseVolumeComplete},
		},
		{
			name: "sync, every Job done: WarmUpComplete and TiKV starts",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupSync, ""), volumesIn), targetTC(2, true), restored,
				jobs(map[string]job.Phase{w0: job.Succeeded, w1: job.Succeeded})),
			want: rwant{actions: []ActionKind{AnnotateTC}, reason: map[string]string{dpv1alpha1.RestoreMemberWarmUpCompleteCondition: dpv1alpha1.RestoreMemberWarmedUpReason}},
		},
		{
			name: "sync, a Job failed: the restore goes on and says which volumes may be slow",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupSync, ""), volumesIn), targetTC(2, true), restored,
				jobs(map[string]job.Phase{w0: job.Failed, w1: job.Succeeded})),
			want: rwant{actions: []ActionKind{AnnotateTC}, reason: map[string]string{dpv1alpha1.RestoreMemberWarmUpCompleteCondition: dpv1alpha1.RestoreMemberWarmUpFailedReason},
				msg: "reading block 42: input/output error"},
		},
		{
			name: "sync, restoremeta not read yet: wait",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupSync, ""), volumesIn), targetTC(2, true)),
			want: rwant{actions: nil, phase: PhaseVolumeComplete},
		},
		{
			name: "sync, a Job found corrupted RocksDB logs: the restore goes on, WarmUpComplete names the file and offset",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupSync, ""), volumesIn), targetTC(2, true), restored,
				jobs(map[string]job.Phase{w0: job.Succeeded, w1: job.Succeeded}), walReport(1, job.PhaseCompleted, "", corruptResult)),
			want: rwant{actions: []ActionKind{AnnotateTC}, reason: map[string]string{dpv1alpha1.RestoreMemberWarmUpCompleteCondition: dpv1alpha1.RestoreMemberWALCorruptedReason},
				msg: w1 + ": " + raft1 + "/wal/000007.log at offset 32768: checksum mismatch"},
		},
		{
			name: "check-wal-only: the data volume's logs verified only, the others read whole too; the Job stops at corruption",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, checkWAL(fedv1alpha1.RestoreWarmupSync), volumesIn), targetTC(2, true), restored),
			want: rwant{actions: append(ensure, CreateJob, CreateJob), true: []string{dpv1alpha1.RestoreMemberWarmUpStartedCondition}, phase: PhaseVolumeComplete,
				check: func(t *testing.T, r Result) {
					if a := args(t, r)[w0]; a != "--block "+raft0+" --wal "+raft0+" --wal "+data0+" --exit-on-corruption"+cpDir {
						t.Errorf("args %q", a)
					}
					if claims := slices.DeleteFunc(slices.Clone(firstJob(t, r).Spec.Template.Spec.Volumes), func(v corev1.Volume) bool { return v.PersistentVolumeClaim == nil }); len(claims) != 2 {
						t.Errorf("the Job does not mount both claims")
					}
				}},
		},
		{
			name: "check-wal-only, async: TiKV waits for the check all the same",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, checkWAL(fedv1alpha1.RestoreWarmupAsync), volumesIn), targetTC(2, true), restored),
			want: rwant{actions: append(ensure, CreateJob, CreateJob), phase: PhaseVolumeComplete},
		},
		{
			name: "check-wal-only, running: TiKV waits",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, checkWAL(fedv1alpha1.RestoreWarmupAsync), volumesIn), targetTC(2, true), restored,
				jobs(map[string]job.Phase{w0: job.Succeeded, w1: job.Active})),
			want: rwant{actions: nil, msg: "running: " + w1, phase: PhaseVolumeComplete},
		},
		{
			name: "check-wal-only, every Job passed: TiKV starts",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, checkWAL(fedv1alpha1.RestoreWarmupSync), volumesIn), targetTC(2, true), restored,
				jobs(map[string]job.Phase{w0: job.Succeeded, w1: job.Succeeded})),
			want: rwant{actions: []ActionKind{AnnotateTC}, reason: map[string]string{dpv1alpha1.RestoreMemberWarmUpCompleteCondition: dpv1alpha1.RestoreMemberWarmedUpReason},
				msg: "no corruption"},
		},
		{
			name: "check-wal-only, a Job failed on corruption: the member fails naming the Job, its claims and the log, and TiKV never starts",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, checkWAL(fedv1alpha1.RestoreWarmupSync), volumesIn), targetTC(2, true), restored,
				jobs(map[string]job.Phase{w0: job.Active, w1: job.Failed}),
				walReport(1, job.PhaseFailed, "RocksDB WAL corrupted: "+raft1+"/wal/000007.log at offset 32768: checksum mismatch", "")),
			want: rwant{actions: nil, reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberWALCheckFailedReason}, phase: PhaseFailed,
				msg: "TiKV member 1 (claims tikv-raft-restored-tikv-1, tikv-restored-tikv-1) failed, so TiKV is not started on its volumes: Job " + w1 + ": RocksDB WAL corrupted: " + raft1 + "/wal/000007.log at offset 32768"},
		},
		{
			name: "check-wal-only, a Job failed without a report: the Job's failure",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, checkWAL(fedv1alpha1.RestoreWarmupSync), volumesIn), targetTC(2, true), restored,
				jobs(map[string]job.Phase{w0: job.Failed, w1: job.Succeeded})),
			want: rwant{actions: nil, reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberWALCheckFailedReason}, phase: PhaseFailed,
				msg: "reading block 42: input/output error"},
		},
		{
			name: "check-wal-only, complete member: no async warm-up after it",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreFinish, append(complete, checkWAL(fedv1alpha1.RestoreWarmupAsync),
				rcond(dpv1alpha1.RestoreMemberWarmUpCompleteCondition, dpv1alpha1.RestoreMemberWarmedUpReason))...), storesUp(targetTC(2, false), 2),
				restored, servingPods(true)),
			want: rwant{actions: nil, phase: PhaseComplete},
		},
		{
			name: "async: TiKV starts at once, no warm-up yet",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupAsync, ""), volumesIn), targetTC(2, true), restored),
			want: rwant{actions: []ActionKind{AnnotateTC}, phase: PhaseVolumeComplete, check: func(t *testing.T, r Result) {
				if c := findCondition(r.Status.Conditions, dpv1alpha1.RestoreMemberWarmUpCompleteCondition); c != nil {
					t.Errorf("WarmUpComplete before TiKV even started: %+v", c)
				}
			}},
		},
		{
			name: "async, complete member: one Job per ready TiKV pod, on its node",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreFinish, append(complete, warm(fedv1alpha1.RestoreWarmupAsync, ""))...), storesUp(targetTC(2, false), 2),
				restored, servingPods(true)),
			want: rwant{actions: append(ensure, CreateJob, CreateJob), phase: PhaseComplete, true: []string{dpv1alpha1.RestoreMemberWarmUpStartedCondition},
				check: func(t *testing.T, r Result) {
					nodes := map[string]string{}
					for _, a := range r.Actions {
						if a.Job != nil {
							nodes[a.Job.Name] = a.Job.Spec.Template.Spec.NodeName
							if aff := a.Job.Spec.Template.Spec.Affinity; aff != nil {
								t.Errorf("a pinned pod needs no affinity: %+v", aff)
							}
						}
					}
					if nodes[w0] != "node-a" || nodes[w1] != "node-b" {
						t.Errorf("nodes %v", nodes)
					}
				}},
		},
		{
			name: "async, a pod not ready yet: its Job waits, the others start",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreFinish, append(complete, warm(fedv1alpha1.RestoreWarmupAsync, ""))...), storesUp(targetTC(2, false), 2),
				restored, servingPods(false)),
			want: rwant{actions: append(ensure, CreateJob), phase: PhaseComplete, check: func(t *testing.T, r Result) {
				if j := firstJob(t, r); j.Name != w1 {
					t.Errorf("created %s", r.Actions[0].Job.Name)
				}
			}},
		},
		{
			name: "async, every Job done: WarmUpComplete",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreFinish, append(complete, warm(fedv1alpha1.RestoreWarmupAsync, ""))...), storesUp(targetTC(2, false), 2),
				restored, servingPods(true), jobs(map[string]job.Phase{w0: job.Succeeded, w1: job.Succeeded})),
			want: rwant{actions: nil, phase: PhaseComplete, reason: map[string]string{dpv1alpha1.RestoreMemberWarmUpCompleteCondition: dpv1alpha1.RestoreMemberWarmedUpReason}},
		},
		{
			name: "no warm-up on a complete member without async",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreFinish, tikvUp[0], tikvUp[1], tikvUp[2], rcond(dpv1alpha1.RestoreMemberCompleteCondition, dpv1alpha1.RestoreMemberRecoveryModeOffReason)), storesUp(targetTC(2, false), 2),
				restored, servingPods(true)),
			want: rwant{actions: nil, phase: PhaseComplete},
		},
		{
			name: "deletion stops running warm-up Jobs before the claims go",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupSync, ""), volumesIn, func(m *dpv1alpha1.VolumeRestoreMember) { m.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }), targetTC(2, true), restored,
				jobs(map[string]job.Phase{w0: job.Succeeded, w1: job.Active})),
			want: rwant{actions: []ActionKind{DeleteJob}, phase: PhaseCleaning, check: func(t *testing.T, r Result) {
				if r.Actions[0].Name != w1 {
					t.Errorf("deleted %s", r.Actions[0].Name)
				}
			}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) { rcheck(t, planned(t, tt.o), tt.want) })
	}
}

func TestRestoreVolumesUsesFSRForTheFSRWarmup(t *testing.T) {
	for _, tt := range []struct {
		name    string
		mode    fedv1alpha1.RestoreWarmupMode
		options []string
		want    int // how many --use-fsr
	}{
		{"fsr warm-up adds it", fedv1alpha1.RestoreWarmupSync, nil, 1},
		{"already given", fedv1alpha1.RestoreWarmupAsync, []string{"--use-fsr"}, 1},
		{"no warm-up: not added", fedv1alpha1.RestoreWarmupNone, nil, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := rmember(dpv1alpha1.RestoreMemberRestoreVolume, func(m *dpv1alpha1.VolumeRestoreMember) {
				m.Spec.Template.Warmup, m.Spec.Template.WarmupStrategy = tt.mode, fedv1alpha1.RestoreWarmupStrategyFsr
				m.Spec.Template.BR = &fedv1alpha1.BRConfig{Options: tt.options}
			})
			r := planned(t, robs(m, targetTC(2, true)))
			var j *batchv1.Job
			for _, a := range r.Actions {
				if a.Kind == CreateJob {
					j = a.Job
				}
			}
			if j == nil {
				t.Fatalf("no restore-volumes Job: %v %+v", r.Actions, r.Status.Conditions)
			}
			n := 0
			for _, a := range j.Spec.Template.Spec.Containers[0].Args {
				if a == "--use-fsr" {
					n++
				}
			}
			if n != tt.want {
				t.Errorf("--use-fsr %d times in %v, want %d", n, j.Spec.Template.Spec.Containers[0].Args, tt.want)
			}
		})
	}
}

// TestWarmupPodsArePlacedAsTiKV: warm-up pods take the target TiKV's node selector,
// tolerations, affinity and cpu/memory (tidb-operator's placement), and still prefer one pod
// per node; a pinned (async) pod keeps its node and takes no selector.
func TestWarmupPodsArePlacedAsTiKV(t *testing.T) {
	zoneB := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}}}}}}
	placed := func(tc *pcv1alpha1.TidbCluster) *pcv1alpha1.TidbCluster {
		tc.Spec.NodeSelector = map[string]string{"pool": "tidb"}
		tc.Spec.TiKV.NodeSelector = map[string]string{"disk": "nvme"}
		tc.Spec.TiKV.Tolerations = []corev1.Toleration{{Key: "dedicated", Value: "tikv", Effect: corev1.TaintEffectNoSchedule}}
		tc.Spec.TiKV.Affinity = zoneB
		tc.Spec.TiKV.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceStorage: resource.MustParse("100Gi")}
		tc.Spec.TiKV.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}
		return tc
	}
	template := func(m *dpv1alpha1.VolumeRestoreMember) {
		m.Spec.Template.Tolerations = []corev1.Toleration{{Key: "backup", Operator: corev1.TolerationOpExists}}
		m.Spec.Template.ResourceRequirements = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), "example.com/gpu": resource.MustParse("1")}}
	}
	warmJob := func(t *testing.T, r Result) corev1.PodSpec {
		for _, a := range r.Actions {
			if a.Kind == CreateJob && a.Job.Labels[job.LabelStep] == job.StepWarmup {
				return a.Job.Spec.Template.Spec
			}
		}
		t.Fatalf("no warm-up Job: %v %+v", r.Actions, r.Status.Conditions)
		return corev1.PodSpec{}
	}
	checkCommon := func(t *testing.T, spec corev1.PodSpec) {
		t.Helper()
		if len(spec.Tolerations) != 2 || spec.Tolerations[0].Key != "backup" || spec.Tolerations[1].Key != "dedicated" {
			t.Errorf("tolerations %+v: want the template's and TiKV's", spec.Tolerations)
		}
		res := spec.Containers[0].Resources
		if res.Requests.Cpu().String() != "2" || res.Limits.Memory().String() != "8Gi" || res.Requests.Name("example.com/gpu", resource.DecimalSI).String() != "1" {
			t.Errorf("resources %+v: want TiKV's cpu and memory, the template's other resources", res)
		}
		if _, ok := res.Requests[corev1.ResourceStorage]; ok {
			t.Errorf("TiKV's storage request reached the pod: %+v", res)
		}
	}

	sync := rmember(dpv1alpha1.RestoreMemberRestoreVolume, template, func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.Template.Warmup = fedv1alpha1.RestoreWarmupSync },
		rcond(dpv1alpha1.RestoreMemberVolumeCompleteCondition, dpv1alpha1.RestoreMemberVolumesRestoredReason))
	spec := warmJob(t, planned(t, robs(sync, placed(targetTC(2, true)), func(o *Observed) { o.RestoreMeta = record(t) })))
	checkCommon(t, spec)
	if spec.NodeSelector["pool"] != "tidb" || spec.NodeSelector["disk"] != "nvme" || len(spec.NodeSelector) != 2 {
		t.Errorf("node selector %v", spec.NodeSelector)
	}
	if a := spec.Affinity; a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "b" ||
		a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("affinity %+v: want TiKV's and the one-pod-per-node preference", a)
	}
	if zoneB.PodAntiAffinity != nil {
		t.Errorf("the TidbCluster's affinity was changed: %+v", zoneB)
	}

	async := rmember(dpv1alpha1.RestoreMemberRestoreFinish, template, func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.Template.Warmup = fedv1alpha1.RestoreWarmupAsync },
		rcond(dpv1alpha1.RestoreMemberVolumeCompleteCondition, dpv1alpha1.RestoreMemberVolumesRestoredReason),
		rcond(dpv1alpha1.RestoreMemberTikvCompleteCondition, dpv1alpha1.RestoreMemberTiKVStartedReason),
		rcond(dpv1alpha1.RestoreMemberCompleteCondition, dpv1alpha1.RestoreMemberRecoveryModeOffReason))
	spec = warmJob(t, planned(t, robs(async, storesUp(placed(targetTC(2, false)), 2), func(o *Observed) {
		o.RestoreMeta = record(t)
		o.Pods = []TiKVPod{{Name: "restored-tikv-0", UID: "p0", Ready: true, Node: "node-a"}, {Name: "restored-tikv-1", UID: "p1", Ready: true, Node: "node-b"}}
	})))
	checkCommon(t, spec)
	if spec.NodeName == "" || spec.NodeSelector != nil || spec.Affinity != nil {
		t.Errorf("pinned pod: node %q selector %v affinity %+v", spec.NodeName, spec.NodeSelector, spec.Affinity)
	}
}

// hasEmptyDirAt tells whether the pod's container mounts an emptyDir at path.
func hasEmptyDirAt(spec corev1.PodSpec, path string) bool {
	for _, m := range spec.Containers[0].VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				return true
			}
		}
	}
	return false
}
