package restoremember

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/meta"
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
// volumes are read. A warm-up that fails does not fail the restore (the data is intact, only
// slower to read): WarmUpComplete says which Jobs failed, with a Warning event.

// warmupMountRoot is where a warm-up pod mounts its claims, one folder per claim.
const warmupMountRoot = "/var/lib/fedbr-warmup"

// warmupTarget is one claim a warm-up Job reads, and how.
type warmupTarget struct {
	claim string
	mode  string // "--fs" or "--block"
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
	case t.Warmup == fedv1alpha1.RestoreWarmupSync:
		return isTrue(m, dpv1alpha1.RestoreMemberVolumeCompleteCondition)
	case t.Warmup == fedv1alpha1.RestoreWarmupAsync:
		return isTrue(m, dpv1alpha1.RestoreMemberCompleteCondition)
	}
	return false
}

// planSyncWarmup runs a sync warm-up (or records that none runs before TiKV); it says whether
// TiKV may start.
func (p *plan) planSyncWarmup() bool {
	if p.isTrue(dpv1alpha1.RestoreMemberWarmUpCompleteCondition) {
		return true
	}
	t := &p.m.Spec.Template
	if t.Warmup == fedv1alpha1.RestoreWarmupNone {
		p.set(dpv1alpha1.RestoreMemberWarmUpCompleteCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberNotRequestedReason, "no warm-up was asked for")
		return true
	}
	if t.EffectiveWarmupStrategy() == fedv1alpha1.RestoreWarmupStrategyCheckWALOnly {
		p.fail(dpv1alpha1.RestoreMemberWarmUpUnsupportedReason, "warmupStrategy check-wal-only is not supported by fedbr (it needs tikv-ctl and never starts TiKV); use fio, hybrid or fsr")
		return false
	}
	if t.Warmup != fedv1alpha1.RestoreWarmupSync {
		return true // async: after restore-finish
	}
	return p.runWarmup(nil)
}

// planAsyncWarmup runs an async warm-up beside the TiKV pods that left recovery mode.
func (p *plan) planAsyncWarmup() {
	if p.m.Spec.Template.Warmup != fedv1alpha1.RestoreWarmupAsync || p.isTrue(dpv1alpha1.RestoreMemberWarmUpCompleteCondition) {
		return
	}
	nodes := map[int]string{}
	for _, pod := range p.o.Pods {
		ord, ok := podOrdinal(pod.Name, p.m.Spec.TCName)
		if !ok || pod.Deleting || !pod.Ready || pod.Node == "" {
			continue
		}
		nodes[ord] = pod.Node
	}
	p.runWarmup(nodes)
}

// runWarmup creates the missing warm-up Jobs and turns their outcomes into WarmUpStarted and
// WarmUpComplete; nodes pins each member's Job to its TiKV pod's node (async). It says
// whether every Job finished.
func (p *plan) runWarmup(nodes map[int]string) bool {
	plans, ok := p.warmupPlans()
	if !ok {
		return false
	}
	var failed, running []string
	var done, total int64 // bytes, over the Jobs that reported
	waiting := 0
	for _, wp := range plans {
		name := WarmupJobName(p.m.Name, wp.ordinal)
		st := p.o.Warmups[name]
		if r, ok := p.o.Report.Step(job.WarmupKey(wp.ordinal)); ok {
			done, total = done+int64(r.Done), total+int64(r.Total)
		}
		switch {
		case st.Phase == job.Failed:
			failed = append(failed, fmt.Sprintf("%s (%s)", name, st.FailureText()))
		case st.Done():
		case st.Exists():
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
	if len(failed) > 0 {
		p.set(dpv1alpha1.RestoreMemberWarmUpCompleteCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberWarmUpFailedReason,
			"warm-up Jobs failed, their volumes may still be slow on first reads: "+strings.Join(failed, "; "))
		return true
	}
	msg := fmt.Sprintf("every block of %d TiKV members' volumes was read (%s)", len(plans), p.m.Spec.Template.EffectiveWarmupStrategy())
	if len(plans) == 0 {
		msg = "nothing to read: fast snapshot restore initialized the data volumes"
	}
	p.set(dpv1alpha1.RestoreMemberWarmUpCompleteCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberWarmedUpReason, msg)
	return true
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
	return planWarmups(claims, p.m.Spec.Template.EffectiveWarmupStrategy()), true
}

// planWarmups groups claims by TiKV member and picks how each is read under strategy.
func planWarmups(claims []Claim, strategy fedv1alpha1.RestoreWarmupStrategy) []warmupPlan {
	byOrdinal := map[int]*warmupPlan{}
	for _, c := range claims {
		data := c.Type == meta.DataDirType
		mode := "--block"
		switch {
		case data && strategy == fedv1alpha1.RestoreWarmupStrategyFsr:
			continue // fast snapshot restore initialized it
		case data && strategy == fedv1alpha1.RestoreWarmupStrategyHybrid:
			mode = "--fs"
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

// warmupJob is the Job that reads one TiKV member's claims, mounted under warmupMountRoot; a
// block read needs a privileged container to open the device behind the mount.
func (p *plan) warmupJob(name string, wp warmupPlan, node string) job.Spec {
	args := []string{"warmup", "--member", p.m.Name, "--report-as", job.WarmupKey(wp.ordinal)}
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	privileged := false
	for i, tg := range wp.targets {
		vol := "warmup-" + strconv.Itoa(i)
		dir := path.Join(warmupMountRoot, tg.claim)
		volumes = append(volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: tg.claim}}})
		mounts = append(mounts, corev1.VolumeMount{Name: vol, MountPath: dir})
		args = append(args, tg.mode, job.InPod(dir))
		privileged = privileged || tg.mode == "--block"
	}
	// One retry by default: a restarted pod resumes from the checkpoint on the volume.
	s := p.podJob(job.StepWarmup, p.o.Env.ImageOr(p.m.Spec.Template.WarmupImage), args, 1, nil, volumes, mounts)
	s.Name = name
	s.Pod.NodeName, s.Pod.Privileged, s.Pod.Affinity = node, privileged, spread(p.m.Name, node)
	return s
}

// spread prefers one warm-up pod per node: an instance's EBS bandwidth is shared by all its
// volumes, so warm-ups on one node would read at a fraction of the speed they could. A pinned
// (async) pod goes to its TiKV's node anyway.
func spread(member, node string) *corev1.Affinity {
	if node != "" {
		return nil
	}
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{job.LabelMember: job.LabelValue(member), job.LabelStep: job.StepWarmup}},
			TopologyKey:   corev1.LabelHostname,
		}}},
	}}
}

// WarmupJobName is the warm-up Job of TiKV member ordinal.
func WarmupJobName(member string, ordinal int) string {
	return job.Name(member, job.StepWarmup+"-"+strconv.Itoa(ordinal))
}

// podOrdinal is the ordinal of TiKV pod name <tc>-tikv-<n>.
func podOrdinal(name, tc string) (int, bool) {
	rest, ok := strings.CutPrefix(name, tc+"-tikv-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}
