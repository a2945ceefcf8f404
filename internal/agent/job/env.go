package job

import (
	"math"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
)

// DefaultTTL is how long a finished step's Job stays for inspection.
const DefaultTTL = 24 * time.Hour

// ServiceAccountName is the service account the steps run as when the template names none;
// the agent creates it, with ServiceAccountRole, in the member's namespace.
const ServiceAccountName = "fedbr-br"

// Env is the agent's own configuration that every step inherits.
type Env struct {
	// Image is the agent's image: steps run `fedbr br …` of exactly the agent's build unless
	// the template's toolImage overrides it.
	Image string
	// Region and AWSEndpoint are passed to every step as --region and --aws-endpoint.
	Region      string
	AWSEndpoint string
	// TTL is the finished Jobs' ttlSecondsAfterFinished; DefaultTTL when zero.
	TTL time.Duration
	// ClusterID identifies this Kubernetes cluster (its kube-system namespace's uid). The steps
	// that create snapshots or volumes get --owner <ClusterID>/<member namespace>, so what they
	// create is tagged for this agent's orphan sweeper until it is recorded; none when empty.
	ClusterID string
	// StepExitDelay is how long every step waits after writing its exit marker before it
	// exits (the agent's --step-exit-delay; see sidecarSafe).
	StepExitDelay time.Duration
	// PodAnnotations are the member annotations (exact keys, or prefixes ending in *) a step's
	// pod may carry (the agent's --pod-annotations); DefaultPodAnnotations when nil.
	PodAnnotations []string
	// PodLabels are the member labels (exact keys, or prefixes ending in *) a step's Job and pod
	// may carry (the agent's --pod-labels); none when empty.
	PodLabels []string
	// SaveStepLogs has the steps that write under a backup's storage (snapshot, size,
	// restore-volumes, restore-data) save their logs there (the agent's --save-step-logs).
	SaveStepLogs bool
}

// LogArgs are the flags of a step that saves its log (--save-log with SaveStepLogs).
func (e Env) LogArgs() []string {
	if e.SaveStepLogs {
		return []string{"--save-log"}
	}
	return nil
}

// CloudArgs are the AWS flags every step takes.
func (e Env) CloudArgs() []string {
	var a []string
	if e.Region != "" {
		a = append(a, "--region", e.Region)
	}
	if e.AWSEndpoint != "" {
		a = append(a, "--aws-endpoint", e.AWSEndpoint)
	}
	return a
}

// OwnerArgs are the --owner flag of a step that creates snapshots or volumes for a member in
// namespace; none without a ClusterID.
func (e Env) OwnerArgs(namespace string) []string {
	if e.ClusterID == "" {
		return nil
	}
	return []string{"--owner", e.ClusterID + "/" + namespace}
}

// SourceNamespaceArgs are the --source-namespaces flag of a step that restores from or deletes
// snapshots (restore-volumes, clean): the data-plane namespaces, as globs, the agent's policy
// lets the member's owner act on (policy.Policy.DataNamespaces). The step uses only snapshots
// tagged fedbr.io/namespace with one of them, so a backupmeta copied from another tenant's
// storage cannot make it restore from or delete that tenant's snapshots. None when there are
// none, which the policy's member check never lets reach a Job: a member is refused unless
// its owner may act on its own namespace.
func SourceNamespaceArgs(globs []string) []string {
	if len(globs) == 0 {
		return nil
	}
	return []string{"--source-namespaces", strings.Join(globs, ",")}
}

// TTLSeconds is TTL in seconds.
func (e Env) TTLSeconds() int32 {
	if e.TTL <= 0 {
		return int32(DefaultTTL / time.Second)
	}
	if e.TTL >= math.MaxInt32*time.Second {
		return math.MaxInt32 // the agent's flag validation refuses more
	}
	return int32(e.TTL / time.Second)
}

// ImageOr is the template's image, else the agent's.
func (e Env) ImageOr(toolImage string) string {
	if toolImage != "" {
		return toolImage
	}
	return e.Image
}

// ServiceAccountObjects are the service account, Role and RoleBinding the steps run with when
// the template names no service account: a step may only read the members in its own
// namespace (the go signals in their spec) and patch their status (its own entry of
// status.steps), StepRules. The agent creates them, and gives a Role that exists with other
// rules these (apply.Applier.EnsureServiceAccount).
func ServiceAccountObjects(namespace string) (*corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding) {
	l := map[string]string{LabelName: NameValue, LabelManagedBy: ManagedByValue}
	meta := metav1.ObjectMeta{Name: ServiceAccountName, Namespace: namespace, Labels: l}
	sa := &corev1.ServiceAccount{ObjectMeta: meta}
	role := &rbacv1.Role{ObjectMeta: meta, Rules: StepRules()}
	rb := &rbacv1.RoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: ServiceAccountName},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ServiceAccountName, Namespace: namespace}},
	}
	return sa, role, rb
}

// StepRules are what a step may do with the API: read its member (the go signals in its spec)
// and patch its status (its own entry of status.steps, by server-side apply).
func StepRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{
		APIGroups: []string{dpv1alpha1.GroupVersion.Group}, Resources: []string{"volumebackupmembers", "volumerestoremembers"},
		Verbs: []string{"get", "list", "watch"},
	}, {
		APIGroups: []string{dpv1alpha1.GroupVersion.Group}, Resources: []string{"volumebackupmembers/status", "volumerestoremembers/status"},
		Verbs: []string{"patch"},
	}}
}
