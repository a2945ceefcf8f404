// Package job builds the Kubernetes Jobs in which the agent runs `fedbr br …` steps, reads
// their outcome from the Job status, and reads the machine-readable status every step
// publishes in its own entry of its member's status.steps (flag --member).
//
// Jobs are plain data here: Build is pure, so the planners can decide on a complete Job and
// the tests can assert its arguments, labels and limits without an API server.
package job

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
)

// Steps, named after the `fedbr br` command each Job runs. The step is also the name of the
// command's entry in its member's status.steps.
const (
	StepPause          = dpv1alpha1.StepPause
	StepSnapshot       = dpv1alpha1.StepSnapshot
	StepClean          = dpv1alpha1.StepClean
	StepSize           = dpv1alpha1.StepSize
	StepRestoreVolumes = dpv1alpha1.StepRestoreVolumes
	StepRestoreData    = dpv1alpha1.StepRestoreData
	// StepWarmup Jobs run `fedbr warmup` on restored volumes, one Job per TiKV member.
	StepWarmup = dpv1alpha1.StepWarmup
	// StepLift undoes what a pause that died placed in PD.
	StepLift = dpv1alpha1.StepLift
	// StepVerify checks a restored cluster from PD.
	StepVerify = dpv1alpha1.StepVerify
	// StepCheck runs the user's check of a restored cluster.
	StepCheck = dpv1alpha1.StepCheck
	// StepTidbCluster reads the TidbCluster a backup saved, for a scratch restore.
	StepTidbCluster = dpv1alpha1.StepTidbCluster
)

// Labels the agent puts on everything it creates, so it can list its own objects and an SRE
// can find them with a selector.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelMember is the member's name (hashed when too long for a label value).
	LabelMember = "dataplane.fedbr.io/member"
	// LabelStep is the step a Job runs.
	LabelStep = "dataplane.fedbr.io/step"

	// AnnotationOwner is <member kind>/<member name> on every Job and ConfigMap the agent
	// creates, so their events map back to the member even when the Job has no owner
	// reference (clean Jobs must survive a foreground deletion of their member).
	AnnotationOwner = "dataplane.fedbr.io/owner"

	NameValue      = "fedbr"
	ManagedByValue = "fedbr-agent"
)

// ContainerName is the name of the one container of every step's pod.
const ContainerName = "br"

// maxNameLength keeps Job names usable as the job-name label value of their pods (63).
const maxNameLength = 63

// Name is the deterministic name of a member's Job for step: <member>-<step>, shortened with
// a hash when the member name is long. It never contains the Kubernetes cluster name (the
// member names already differ per VolumeBackup, and pod names must fit in 63 characters).
func Name(member, step string) string {
	return shorten(member, maxNameLength-len(step)-1) + "-" + step
}

// LabelValue makes s usable as a label value: at most 63 characters, shortened with a hash.
func LabelValue(s string) string {
	return shorten(s, maxNameLength)
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])[:8]
	return strings.TrimRight(s[:n-len(h)-1], "-.") + "-" + h
}

// Selector are the labels of every object the agent created for member.
func Selector(member string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedByValue, LabelMember: LabelValue(member)}
}

// Spec is everything a step's Job is made of.
type Spec struct {
	// Member is the member object's name and Namespace its namespace; Owner makes the Job
	// (and its pods) go away with the member.
	Member    string
	Namespace string
	Owner     metav1.OwnerReference
	// OwnerKind is the member's kind, recorded in AnnotationOwner.
	OwnerKind string
	Step      string
	// Name overrides Name(Member, Step) (clean attempts carry a number).
	Name  string
	Image string
	// Args follow the binary: "br", "<step>", flags….
	Args []string
	// BackoffLimit is the Job's retries; ActiveDeadlineSeconds its hard time limit (0: none,
	// for a step whose phase the manager times: its verdict's route stops the step);
	// TTLSecondsAfterFinished how long the finished Job stays for inspection.
	BackoffLimit            int32
	ActiveDeadlineSeconds   int64
	TTLSecondsAfterFinished int32
	// Labels and Annotations are the member's (the manager copied them from the VolumeBackup
	// or VolumeRestore): Build puts those that travel on (see podLabels) on the Job and its pod
	// template.
	Labels      map[string]string
	Annotations map[string]string
	// AllowedAnnotations are the annotation keys (an exact key, or a prefix ending in *) of
	// Annotations that the pod may carry: the agent's --pod-annotations (Env.PodAnnotations);
	// DefaultPodAnnotations when nil. AllowedLabels are those of Labels the Job and the pod
	// carry: the agent's --pod-labels (Env.PodLabels); none when empty.
	AllowedAnnotations, AllowedLabels []string
	Pod                               PodTemplate
	// ExitDelay is how long the step waits after writing its exit marker (see sidecarSafe).
	ExitDelay time.Duration
}

// PodTemplate is what the member's template says about the pods.
type PodTemplate struct {
	Env               []corev1.EnvVar
	Resources         corev1.ResourceRequirements
	Tolerations       []corev1.Toleration
	PriorityClassName string
	ImagePullSecrets  []corev1.LocalObjectReference
	ServiceAccount    string
	Volumes           []corev1.Volume
	VolumeMounts      []corev1.VolumeMount
	// NodeName pins the pod to a node (a warm-up beside a running TiKV must share its node:
	// the volumes are ReadWriteOnce).
	NodeName string
	// Privileged lets the container read the block device behind a mounted volume (see
	// securityContexts).
	Privileged bool
	// Affinity and NodeSelector place the pod (warm-up pods where TiKV may run, spread over
	// nodes: each node's EBS bandwidth is its own).
	Affinity     *corev1.Affinity
	NodeSelector map[string]string
	// RestartPolicy is the pod's; empty means Never, a new pod per retry. OnFailure restarts the
	// container in the same pod, which keeps the pod's emptyDir volumes (a warm-up's checkpoint).
	RestartPolicy corev1.RestartPolicy
	// Command replaces the image's entrypoint (a user's check; the steps run the image's own).
	Command []string
	// EnvFrom adds whole Secrets to the environment (a user's check).
	EnvFrom []corev1.EnvFromSource
	// NoToken mounts no service-account token: a container that is not fedbr's (a user's
	// check) gets no Kubernetes identity at all.
	NoToken bool
}

// Build returns the Job for s.
func Build(s Spec) *batchv1.Job {
	name := s.Name
	if name == "" {
		name = Name(s.Member, s.Step)
	}
	labels := allowedKeys(dpv1alpha1.CarriedLabels(s.Labels), s.AllowedLabels)
	for k, v := range Selector(s.Member) {
		labels[k] = v
	}
	labels[LabelName] = NameValue
	labels[LabelComponent] = s.Step
	labels[LabelStep] = s.Step
	allowedAnnotations := s.AllowedAnnotations
	if allowedAnnotations == nil {
		allowedAnnotations = DefaultPodAnnotations
	}
	annotations := allowedKeys(dpv1alpha1.CarriedAnnotations(s.Annotations), allowedAnnotations)
	jobAnnotations := maps.Clone(annotations)
	jobAnnotations[AnnotationOwner] = s.OwnerKind + "/" + s.Member
	var owners []metav1.OwnerReference
	if s.Owner.UID != "" {
		owners = []metav1.OwnerReference{s.Owner}
	}
	podSecurity, containerSecurity := securityContexts(s.Pod.Privileged)
	restart := s.Pod.RestartPolicy
	if restart == "" {
		restart = corev1.RestartPolicyNever
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.Namespace, Labels: labels, Annotations: jobAnnotations,
			OwnerReferences: owners,
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To(s.BackoffLimit),
			ActiveDeadlineSeconds:   deadline(s.ActiveDeadlineSeconds),
			TTLSecondsAfterFinished: ptr.To(s.TTLSecondsAfterFinished),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{
					RestartPolicy:                restart,
					SecurityContext:              podSecurity,
					NodeName:                     s.Pod.NodeName,
					Affinity:                     s.Pod.Affinity,
					NodeSelector:                 s.Pod.NodeSelector,
					ServiceAccountName:           s.Pod.ServiceAccount,
					AutomountServiceAccountToken: noToken(s.Pod.NoToken),
					Tolerations:                  s.Pod.Tolerations,
					PriorityClassName:            s.Pod.PriorityClassName,
					ImagePullSecrets:             s.Pod.ImagePullSecrets,
					Volumes:                      s.Pod.Volumes,
					// The pause lifts everything on SIGTERM within its cleanup timeout (30s by
					// default); snapshot and restore steps delete what they created.
					TerminationGracePeriodSeconds: ptr.To[int64](120),
					Containers: []corev1.Container{{
						Name:  ContainerName,
						Image: s.Image,
						// Paths in Args are relative to "/": the same pod then works on a real node
						// and on a lab node, whose "/" is the container's $FEDBR_LAB_ROOT.
						WorkingDir:      "/",
						Command:         s.Pod.Command,
						Args:            s.Args,
						Env:             append(podEnv(), s.Pod.Env...),
						EnvFrom:         s.Pod.EnvFrom,
						Resources:       withDefaultRequests(s.Pod.Resources),
						VolumeMounts:    s.Pod.VolumeMounts,
						SecurityContext: containerSecurity,
					}},
				},
			},
		},
	}
	sidecarSafe(&j.Spec.Template.Spec, s.ExitDelay)
	return j
}

// noToken is the pod's automountServiceAccountToken: false when it must have no token, else
// unset (the service account's own setting).
func noToken(none bool) *bool {
	if none {
		return ptr.To(false)
	}
	return nil
}

// NonRootID is the user and group a step runs as (distroless's "nonroot"): any non-root id
// passes Pod Security "restricted", and this one owns nothing on the node or in a volume.
const NonRootID int64 = 65532

// securityContexts are a step pod's and its container's security settings; the member's
// template has no field for them, so they are fedbr's. An unprivileged step meets Pod Security
// "restricted": user and group NonRootID, no privilege escalation, no capabilities, the
// runtime's default seccomp profile, and a read-only root file system (a step writes only to
// its mounted volumes: a local storage its metadata, a warm-up its checkpoint in an emptyDir,
// since a volume's root is root's). A privileged one (a warm-up reading the block device
// behind a mount) runs as root, since device nodes are root's, and needs a namespace whose Pod
// Security level is "privileged".
func securityContexts(privileged bool) (*corev1.PodSecurityContext, *corev1.SecurityContext) {
	pod := &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if privileged {
		return pod, &corev1.SecurityContext{Privileged: ptr.To(true), RunAsUser: ptr.To[int64](0), RunAsNonRoot: ptr.To(false),
			ReadOnlyRootFilesystem: ptr.To(true)}
	}
	pod.RunAsNonRoot, pod.RunAsUser, pod.RunAsGroup = ptr.To(true), ptr.To(NonRootID), ptr.To(NonRootID)
	return pod, &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
}

// podEnv gives the step its pod's namespace and name (its member lives in the pod's
// namespace). Template env comes after it, so a user's value wins.
func podEnv() []corev1.EnvVar {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	return []corev1.EnvVar{field("POD_NAMESPACE", "metadata.namespace"), field("POD_NAME", "metadata.name")}
}

// InPod makes an absolute path in the pod an argument relative to the container's working
// directory "/" (see Build).
func InPod(p string) string {
	return strings.TrimLeft(p, "/")
}

// DefaultPodAnnotations are the annotations a step's pod carries unless the agent's
// --pod-annotations says otherwise: the pod-level IAM role keys (kube2iam's and kiam's
// iam.amazonaws.com/role, and eks.amazonaws.com/role-arn).
var DefaultPodAnnotations = []string{"iam.amazonaws.com/role", "eks.amazonaws.com/role-arn"}

// allowedKeys are the member's labels or annotations (those that travel on:
// dpv1alpha1.CarriedLabels, CarriedAnnotations) that a step's Job and pod carry: the keys
// allowed names, never the Job controller's. Labels and annotations are read by whatever
// watches pods — a sidecar injector (sidecar.istio.io/*, istio.io/rev, vault.hashicorp.com/*,
// config.linkerd.io/*, azure.workload.identity/use) adds containers, volumes and credentials to
// the pod on their word — so only the keys the operator allows travel, never the template
// author's whole set.
func allowedKeys(carried map[string]string, allowed []string) map[string]string {
	for k := range carried {
		if jobControllerKey(k) || !keyAllowed(allowed, k) {
			delete(carried, k)
		}
	}
	return carried
}

// keyAllowed says whether key (an annotation's or a label's) is one of allowed: an exact key,
// or a prefix ending in *.
func keyAllowed(allowed []string, key string) bool {
	for _, a := range allowed {
		if p, ok := strings.CutSuffix(a, "*"); ok && strings.HasPrefix(key, p) || a == key {
			return true
		}
	}
	return false
}

func jobControllerKey(k string) bool {
	return k == "job-name" || k == "controller-uid" || strings.HasPrefix(k, "batch.kubernetes.io/")
}

// Owned splits jobs (listed by the member's Selector) into the member's and the names of the
// others: anyone who may create Jobs in the namespace can give one the member's labels, and
// such a Job's state must never count as a step's. A Job is the member's when its controller
// reference names the member's uid; a clean Job has no owner (a foreground deletion of the
// member would delete it mid-clean), and counts when it carries the owner annotation naming
// the member (kind/name) and no controller at all — a weaker proof, which the clean's outcome
// does not rest on alone: it is the step's report, which only the step's identity writes.
func Owned(member metav1.Object, kind string, jobs []batchv1.Job) (owned []batchv1.Job, foreign []string) {
	for i := range jobs {
		j := &jobs[i]
		c := metav1.GetControllerOf(j)
		switch {
		case c != nil && c.UID == member.GetUID(),
			c == nil && j.Labels[LabelStep] == StepClean && j.Annotations[AnnotationOwner] == kind+"/"+member.GetName():
			owned = append(owned, *j)
		default:
			foreign = append(foreign, j.Name)
		}
	}
	return owned, foreign
}

// DefaultRequests are a step container's cpu and memory requests when its template names
// neither as a request or a limit: a step pod is then not BestEffort, the first evicted under
// a node's memory pressure (a pause evicted inside its window fails the backup). The memory is
// what the pause and restore-data peak at on clusters of up to about a hundred thousand
// regions (make bench-scale: about 100 MiB at twenty thousand, 1.3 and 2.4 GiB at a million;
// docs/br.md, "Scale"); larger clusters set the template's resources. No limit is set: a
// limit below a step's peak kills it mid-window.
var DefaultRequests = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("100m"),
	corev1.ResourceMemory: resource.MustParse("256Mi"),
}

// withDefaultRequests is r with DefaultRequests for each of cpu and memory r neither requests
// nor limits (a limit alone makes Kubernetes request the limit).
func withDefaultRequests(r corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *r.DeepCopy()
	for name, q := range DefaultRequests {
		if _, ok := out.Requests[name]; ok {
			continue
		}
		if _, ok := out.Limits[name]; ok {
			continue
		}
		if out.Requests == nil {
			out.Requests = corev1.ResourceList{}
		}
		out.Requests[name] = q
	}
	return out
}

// deadline is a Job's activeDeadlineSeconds: none for 0.
func deadline(seconds int64) *int64 {
	if seconds <= 0 {
		return nil
	}
	return ptr.To(seconds)
}
