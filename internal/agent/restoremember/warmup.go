package restoremember

import (
	"fmt"
	"maps"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/warmup"
)

// Warm-up reads every block of the restored volumes once, so that TiKV does not pay EBS's
// lazy loading on its first reads. One Job per TiKV member runs `fedbr warmup` over that
// member's claims:
//   - sync: once the claims exist and before TiKV starts (TiKV's start waits for it);
//   - async: once TiKV left recovery mode (the member is Complete), on each TiKV pod's node
//     beside the running TiKV. Not sooner: restore-finish restarts the pods, and a warm-up pod
//     holding a ReadWriteOnce volume on the old node would keep the new pod's volume from
//     attaching if it landed elsewhere.
//
// The strategy decides how a volume is read: fio reads every volume's block device; hybrid
// (default) reads the data volume's files, newest first, and the other volumes' devices; fsr
// has restore-volumes create the data volumes through fast snapshot restore, so only the other
// volumes are read, and the data volumes restore-volumes' result says went without it (the
// region's FSR quota was full, ...) as hybrid reads them; check-wal-only reads the other volumes' devices and only the RocksDB logs
// of the data volume. Every volume a Job mounts has its RocksDB write-ahead logs verified
// (`fedbr warmup --wal`).
//
// A warm-up that fails does not fail the restore (the data is intact, only slower to read):
// WarmUpComplete says which Jobs failed, or which logs are corrupted, with a Warning event.
// Under check-wal-only the warm-up is a check: it runs before TiKV starts whatever the mode,
// its Jobs stop at the first corrupted log (--exit-on-corruption), and a Job that fails fails
// the member.

// warmupMountRoot is where a warm-up pod mounts its claims, one folder per claim.
const warmupMountRoot = "/var/lib/fedbr-warmup"

// warmupTarget is one claim a warm-up Job mounts, and how it reads it.
type warmupTarget struct {
	claim string
	mode  string // "--fs", "--block", or "" to verify its RocksDB logs only
}

// warmupPlan is the warm-up Job of one TiKV member.
type warmupPlan struct {
	ordinal int
	targets []warmupTarget
}

// WarmupPending says the member's warm-up Jobs are due or running: Plan then needs the
// restoremeta again, to know every TiKV member's claims.
func WarmupPending(m *dpv1alpha1.VolumeRestoreMember) bool {
	t := &m.Spec.Template
	switch {
	case isTrue(m, dpv1alpha1.RestoreMemberWarmUpCompleteCondition), isTrue(m, dpv1alpha1.RestoreMemberFailedCondition):
		return false
	case t.WarmsUpBeforeTiKV():
		return isTrue(m, dpv1alpha1.RestoreMemberVolumeCompleteCondition)
	case t.Warmup == fedv1alpha1.RestoreWarmupAsync:
		return isTrue(m, dpv1alpha1.RestoreMemberCompleteCondition)
	}
	return false
}

// planSyncWarmup runs a warm-up that TiKV waits for (sync, or check-wal-only), or records
// that none was asked for; it says whether TiKV may start.
func (p *plan) planSyncWarmup() bool {
	if p.isTrue(dpv1alpha1.RestoreMemberWarmUpCompleteCondition) {
		return true
	}
	t := &p.m.Spec.Template
	if t.Warmup == fedv1alpha1.RestoreWarmupNone {
		p.set(dpv1alpha1.RestoreMemberWarmUpCompleteCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberNotRequestedReason, "no warm-up was asked for")
		return true
	}
	if !t.WarmsUpBeforeTiKV() {
		return true // async: after restore-finish
	}
	return p.runWarmup(nil)
}

// planAsyncWarmup runs an async warm-up beside the TiKV pods that left recovery mode.
func (p *plan) planAsyncWarmup() {
	t := &p.m.Spec.Template
	if t.Warmup != fedv1alpha1.RestoreWarmupAsync || t.WarmsUpBeforeTiKV() || p.isTrue(dpv1alpha1.RestoreMemberWarmUpCompleteCondition) {
		return
	}
	nodes := map[int]string{}
	for _, pod := range p.o.Pods {
		ord, ok := tidbcluster.TiKVOrdinal(pod.Name, p.m.Spec.TCName)
		if !ok || pod.Deleting || !pod.Ready || pod.Node == "" {
			continue
		}
		nodes[ord] = pod.Node
	}
	p.runWarmup(nodes)
}

// runWarmup creates the missing warm-up Jobs and turns their outcomes into WarmUpStarted and
// WarmUpComplete (under check-wal-only a failed Job fails the member); nodes pins each
// member's Job to its TiKV pod's node (async). It says whether every Job finished.
func (p *plan) runWarmup(nodes map[int]string) bool {
	plans, ok := p.warmupPlans()
	if !ok {
		return false
	}
	check := p.m.Spec.Template.EffectiveWarmupStrategy() == fedv1alpha1.RestoreWarmupStrategyCheckWALOnly
	var failed, corrupted, running []string
	var done, total int64 // bytes, over the Jobs that reported
	waiting := 0
	for _, wp := range plans {
		name := WarmupJobName(p.m.Name, wp.ordinal)
		st := p.o.Warmups[name]
		key := job.WarmupKey(wp.ordinal)
		if r, ok := p.o.Report.Step(key); ok {
			done, total = done+r.Done, total+r.Total
		}
		switch {
		case st.Phase == job.Failed && check:
			p.fail(dpv1alpha1.RestoreMemberWALCheckFailedReason, fmt.Sprintf("the check-wal-only warm-up of TiKV member %d (claims %s) failed, so TiKV is not started on its volumes: %s",
				wp.ordinal, wp.claims(), p.warmupFailure(key, st)))
			return false
		case st.Phase == job.Failed:
			failed = append(failed, fmt.Sprintf("%s (%s)", name, p.warmupFailure(key, st)))
		case st.Phase == job.Succeeded:
			corrupted = append(corrupted, p.walCorruptions(name, key)...)
		case st.Exists():
			if p.m.Spec.Template.WarmsUpBeforeTiKV() && p.warmupStalled(name, key, wp, st) {
				return false
			}
			running = append(running, name)
		default:
			node, pinned := nodes[wp.ordinal]
			if nodes != nil && !pinned {
				waiting++ // its TiKV pod is not ready yet; the pod's events bring it back
				continue
			}
			// The Jobs report their progress in the member's status.steps (ensureCommon).
			if !p.createJob(p.warmupJob(name, wp, node)) {
				return false
			}
			running = append(running, name)
		}
	}
	if len(running) > 0 {
		read := ""
		if total > 0 {
			read = fmt.Sprintf("; read %s of %s (%.0f%%)", resource.NewQuantity(done, resource.BinarySI), resource.NewQuantity(total, resource.BinarySI),
				float64(done)*100/float64(total))
		}
		p.set(dpv1alpha1.RestoreMemberWarmUpStartedCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberWarmingUpReason,
			fmt.Sprintf("%s warm-up of %d TiKV members%s; running: %s", p.m.Spec.Template.Warmup, len(plans), read, strings.Join(running, ", ")))
	}
	if len(running) > 0 || waiting > 0 {
		return false
	}
	switch {
	case len(corrupted) > 0:
		msg := "corrupted RocksDB write-ahead logs (TiKV may refuse to start or lose writes on these volumes): " + strings.Join(corrupted, "; ")
		if len(failed) > 0 {
			msg += "; warm-up Jobs failed: " + strings.Join(failed, "; ")
		}
		p.set(dpv1alpha1.RestoreMemberWarmUpCompleteCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberWALCorruptedReason, msg)
		return true
	case len(failed) > 0:
		p.set(dpv1alpha1.RestoreMemberWarmUpCompleteCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberWarmUpFailedReason,
			"warm-up Jobs failed, their volumes may still be slow on first reads: "+strings.Join(failed, "; "))
		return true
	}
	msg := fmt.Sprintf("every block of %d TiKV members' volumes was read (%s), their RocksDB logs verified", len(plans), p.m.Spec.Template.EffectiveWarmupStrategy())
	switch {
	case len(plans) == 0:
		msg = "nothing to read: fast snapshot restore initialized the data volumes"
	case check:
		msg = fmt.Sprintf("the RocksDB logs of %d TiKV members' volumes verified, no corruption; the volumes besides the data volume read (check-wal-only)", len(plans))
	}
	p.set(dpv1alpha1.RestoreMemberWarmUpCompleteCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberWarmedUpReason, msg)
	return true
}

// warmupPhaseReading is `fedbr warmup`'s phase while it reads (internal/cmd/warmup).
const warmupPhaseReading = report.PhaseReading

// warmupStalled fails the member (ProgressStalled) when the running warm-up Job name, which
// TiKV waits for, has read nothing for stallTimeout: since its progressAt (stamped on every
// Reading report), or, from a Job that never reported (its pod never ran: refused,
// unschedulable), since the Job started. The failure takes the route every
// failure takes: the manager fails the restore and deletes its members, and the deletion stops
// the Jobs. A Job that moved within the window has the member looked at again when the window
// would end. An async warm-up is never judged: TiKV serves beside it, and only its Job's
// deadline (stepTimeout) bounds it.
func (p *plan) warmupStalled(name, key string, wp warmupPlan, st job.State) bool {
	r, reported := p.o.Report.Step(key)
	if reported && r.Phase != warmupPhaseReading || st.Done() || st.Deleting {
		return false
	}
	var since time.Time
	switch {
	case r.ProgressAt != nil:
		since = r.ProgressAt.Time
	case !reported:
		since = st.Started
	}
	if since.IsZero() {
		return false // nothing to count from: the manager's timer of the member's phase (stepTimeout) bounds it
	}
	window := p.m.Spec.Template.EffectiveStallTimeout()
	if left := since.Add(window).Sub(p.now); left > 0 {
		p.requeueIn(left)
		return false
	}
	what := fmt.Sprintf("the %s warm-up Job %s (TiKV member %d, claims %s)", p.m.Spec.Template.Warmup, name, wp.ordinal, wp.claims())
	const raise = "TiKV waits for it, so the restore fails. If the volumes are only slow to read, raise spec.template.stallTimeout of the VolumeRestore, or warm up async"
	if !reported {
		p.fail(dpv1alpha1.ProgressStalledReason, fmt.Sprintf("%s reported no progress for %s (stallTimeout) since it started at %s: its pod may never have run (see the Job's and its pods' events); %s",
			what, window, since.UTC().Format(time.RFC3339), raise))
		return true
	}
	read := fmt.Sprintf("%s read", resource.NewQuantity(r.Done, resource.BinarySI))
	if r.Total > 0 {
		read = fmt.Sprintf("%s of %s (%.0f%%) read", resource.NewQuantity(r.Done, resource.BinarySI), resource.NewQuantity(r.Total, resource.BinarySI),
			float64(r.Done)*100/float64(r.Total))
	}
	p.fail(dpv1alpha1.ProgressStalledReason, fmt.Sprintf("%s read nothing for %s (stallTimeout): %s, unchanged since %s; %s",
		what, window, read, since.UTC().Format(time.RFC3339), raise))
	return true
}

// warmupFailure says why the warm-up Job of step key failed: its own report's error when it
// reported one (a corrupted log names the file and offset), else the Job's failure.
func (p *plan) warmupFailure(key string, st job.State) string {
	if r, ok := p.o.Report.Step(key); ok && r.Phase == job.PhaseFailed && r.Error != "" {
		return fmt.Sprintf("Job %s: %s", st.Name, r.Error)
	}
	return st.FailureText()
}

// walCorruptions are the corrupted RocksDB logs the succeeded warm-up Job name reported in its
// result (step key), one "Job: file at offset: reason" each.
func (p *plan) walCorruptions(name, key string) []string {
	var sum warmup.Summary
	if _, err := p.o.Report.Result(key, &sum); err != nil {
		return []string{fmt.Sprintf("%s: %v", name, err)}
	}
	var out []string
	for _, w := range sum.WAL {
		for _, c := range w.Corruptions {
			out = append(out, fmt.Sprintf("%s: %s", name, c))
		}
	}
	return out
}

// warmupPlans decides, from the rebuilt claims, which claims each TiKV member's Job reads and
// how; members with nothing to read get no Job.
func (p *plan) warmupPlans() ([]warmupPlan, bool) {
	if p.o.RestoreMeta == nil || p.o.TC == nil {
		return nil, false // read on every reconcile of an unfinished restore; the next one has it
	}
	claims, err := p.claims()
	if err != nil {
		p.fail(dpv1alpha1.RestoreMemberRebuildFailedReason, err.Error())
		return nil, false
	}
	return planWarmups(claims, p.m.Spec.Template.EffectiveWarmupStrategy(), p.notFastRestored()), true
}

// notFastRestored are the restored volumes restore-volumes' result says were not created
// through fast snapshot restore (FSR was asked for, but the account-region's quota had no
// room, the snapshot was too large, or AWS refused it): the fsr strategy reads them as hybrid
// does. Without a readable result, none.
func (p *plan) notFastRestored() map[string]bool {
	var res restorevolumes.Result
	if ok, err := p.o.Report.Result(job.StepRestoreVolumes, &res); !ok || err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, v := range res.Volumes {
		if !v.FastRestored {
			out[v.VolumeID] = true
		}
	}
	return out
}

// planWarmups groups claims by TiKV member and picks how each is read under strategy;
// notFast are the restored volumes created without fast snapshot restore.
func planWarmups(claims []Claim, strategy fedv1alpha1.RestoreWarmupStrategy, notFast map[string]bool) []warmupPlan {
	byOrdinal := map[int]*warmupPlan{}
	for _, c := range claims {
		data := c.Type == meta.DataDirType
		fsr := strategy == fedv1alpha1.RestoreWarmupStrategyFsr
		mode := "--block"
		switch {
		case strategy == fedv1alpha1.RestoreWarmupStrategyFs:
			mode = "--fs" // every volume by its files: no device, no privilege
		case data && fsr && !notFast[claimVolume(c)]:
			continue // fast snapshot restore initialized it
		case data && (fsr || strategy == fedv1alpha1.RestoreWarmupStrategyHybrid):
			mode = "--fs"
		case data && strategy == fedv1alpha1.RestoreWarmupStrategyCheckWALOnly:
			mode = "" // its RocksDB logs only
		}
		wp := byOrdinal[c.Ordinal]
		if wp == nil {
			wp = &warmupPlan{ordinal: c.Ordinal}
			byOrdinal[c.Ordinal] = wp
		}
		wp.targets = append(wp.targets, warmupTarget{claim: c.PVC.Name, mode: mode})
	}
	out := make([]warmupPlan, 0, len(byOrdinal))
	for _, wp := range byOrdinal {
		sort.Slice(wp.targets, func(i, j int) bool { return wp.targets[i].claim < wp.targets[j].claim })
		out = append(out, *wp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ordinal < out[j].ordinal })
	return out
}

// claimVolume is the EBS volume id a claim's PV binds, or "".
func claimVolume(c Claim) string {
	if c.PV == nil || c.PV.Spec.CSI == nil {
		return ""
	}
	return c.PV.Spec.CSI.VolumeHandle
}

// claims names the claims of wp.
func (wp warmupPlan) claims() string {
	names := make([]string, 0, len(wp.targets))
	for _, tg := range wp.targets {
		names = append(names, tg.claim)
	}
	return strings.Join(names, ", ")
}

// warmupJob is the Job that reads one TiKV member's claims, mounted under warmupMountRoot, and
// verifies their RocksDB logs (the kv engine's under the data volume's db/, and wherever
// rocksdb.wal-dir or raftdb put theirs); a block read needs a privileged container to open
// the device behind the mount. Under check-wal-only the Job stops at the first corrupted log.
func (p *plan) warmupJob(name string, wp warmupPlan, node string) job.Spec {
	args := []string{"warmup", "--member", p.m.Name, "--report-as", job.WarmupKey(wp.ordinal)}
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	privileged, reads := false, false
	for i, tg := range wp.targets {
		vol := "warmup-" + strconv.Itoa(i)
		dir := job.InPod(path.Join(warmupMountRoot, tg.claim))
		volumes = append(volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: tg.claim}}})
		mounts = append(mounts, corev1.VolumeMount{Name: vol, MountPath: path.Join(warmupMountRoot, tg.claim)})
		if tg.mode != "" {
			args = append(args, tg.mode, dir)
			reads = true
		}
		args = append(args, "--wal", dir)
		privileged = privileged || tg.mode == "--block"
	}
	if p.m.Spec.Template.EffectiveWarmupStrategy() == fedv1alpha1.RestoreWarmupStrategyCheckWALOnly {
		args = append(args, "--exit-on-corruption")
	}
	// The checkpoints of what is read go to an emptyDir: the volumes' roots are root's, and the
	// unprivileged (--fs) pod runs as job.NonRootID.
	if reads {
		volumes = append(volumes, corev1.Volume{Name: WarmupCheckpointVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		mounts = append(mounts, corev1.VolumeMount{Name: WarmupCheckpointVolume, MountPath: WarmupCheckpointDir})
		args = append(args, "--checkpoint-dir", job.InPod(WarmupCheckpointDir))
	}
	// One retry by default, a restart of the container in the same pod (OnFailure), which
	// resumes from the checkpoints in the pod's emptyDir; a replaced pod (evicted, deleted, its
	// node gone) starts with an empty one and reads everything again.
	s := p.podJob(job.StepWarmup, p.o.Env.ImageOr(p.m.Spec.Template.WarmupImage), args, 1, nil, volumes, mounts)
	s.Name = name
	s.Pod.NodeName, s.Pod.Privileged = node, privileged
	s.Pod.RestartPolicy = corev1.RestartPolicyOnFailure
	// Placed as TiKV is (tidb-operator's placement of the target's TiKV pods): its nodes,
	// taints and resources. A pinned (async) pod goes to its TiKV's node anyway.
	tikv := tidbcluster.TiKVPlacement(p.o.TC)
	s.Pod.Tolerations = append(append([]corev1.Toleration(nil), s.Pod.Tolerations...), tikv.Tolerations...)
	s.Pod.Resources = warmupResources(s.Pod.Resources, tikv.Resources)
	if node == "" {
		s.Pod.NodeSelector, s.Pod.Affinity = tikv.NodeSelector, spread(tikv.Affinity, p.m.Name)
	}
	return s
}

// warmupResources are the template's resources with TiKV's cpu and memory instead of the
// template's, when the TidbCluster gives TiKV any (a request from one and a limit from the
// other could contradict each other).
func warmupResources(template, tikv corev1.ResourceRequirements) corev1.ResourceRequirements {
	if len(tikv.Requests)+len(tikv.Limits) == 0 {
		return template
	}
	keep := func(list, with corev1.ResourceList) corev1.ResourceList {
		out := corev1.ResourceList{}
		for name, q := range list {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				out[name] = q
			}
		}
		maps.Copy(out, with)
		if len(out) == 0 {
			return nil
		}
		return out
	}
	r := *template.DeepCopy()
	r.Requests, r.Limits = keep(template.Requests, tikv.Requests), keep(template.Limits, tikv.Limits)
	return r
}

// spread is TiKV's affinity plus a preference for one warm-up pod per node: an instance's EBS
// bandwidth is shared by all its volumes, so warm-ups on one node would read at a fraction of
// the speed they could.
func spread(tikv *corev1.Affinity, member string) *corev1.Affinity {
	a := &corev1.Affinity{}
	if tikv != nil {
		a = tikv.DeepCopy()
	}
	if a.PodAntiAffinity == nil {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
		corev1.WeightedPodAffinityTerm{Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{job.LabelMember: job.LabelValue(member), job.LabelStep: job.StepWarmup}},
			TopologyKey:   corev1.LabelHostname,
		}})
	return a
}

// The warm-up pod's emptyDir for its checkpoints (warmup --checkpoint-dir).
const (
	WarmupCheckpointVolume = "warmup-checkpoint"
	WarmupCheckpointDir    = "/var/run/fedbr-warmup"
)

// WarmupJobName is the warm-up Job of TiKV member ordinal.
func WarmupJobName(member string, ordinal int) string {
	return job.Name(member, job.StepWarmup+"-"+strconv.Itoa(ordinal))
}
