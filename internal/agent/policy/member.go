package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// Member is what the policy judges of one member, whichever its kind: where it comes from,
// where it acts, and what its template asks of the pods, each value with the field it is in.
type Member struct {
	// Namespace is the member's namespace, where its Jobs run; TCNamespace is its TidbCluster's.
	Namespace, TCNamespace string
	// OwnerNamespace is the control-plane namespace the manager recorded (label
	// dataplane.fedbr.io/owner-namespace); "" when the member has none.
	OwnerNamespace string
	// Images are the images the template names (toolImage, warmupImage); empty ones are the
	// agent's own and are left out.
	Images []Field
	// ServiceAccount is the template's serviceAccount ("": the steps' own).
	ServiceAccount string
	// Env is the template's env, in the field EnvPath.
	Env     []corev1.EnvVar
	EnvPath string
	// Volumes and Mounts are the template's additional volumes and mounts and the local
	// storage's.
	Volumes []Volume
	Mounts  []Mount
	// S3 is the member's S3 storage as its steps will use it; nil when it has none.
	S3 *S3Location
	// WarmupStrategy is the restore's warm-up strategy, and BlockWarmup why that warm-up reads
	// block devices (in a privileged container); "" when it reads none.
	WarmupStrategy, BlockWarmup string
}

// S3Location is an S3 storage and where it is: its bucket and its prefix as the steps take them
// (job.StorageFor: bucket and prefix, else the path's bucket and the path's prefix joined with
// the prefix), the prefix not cleaned, so that the policy sees what was written.
type S3Location struct {
	Path           string
	Bucket, Prefix string
}

// String is the location as s3://BUCKET/PREFIX.
func (l S3Location) String() string {
	if l.Prefix == "" {
		return "s3://" + l.Bucket
	}
	return "s3://" + l.Bucket + "/" + l.Prefix
}

// Field is a value and where it is.
type Field struct{ Path, Value string }

// Volume is a pod volume and where it is.
type Volume struct {
	Path   string
	Volume corev1.Volume
}

// Mount is a volume mount and where it is.
type Mount struct {
	Path  string
	Mount corev1.VolumeMount
}

// ForBackup is what the policy judges of a VolumeBackupMember.
func ForBackup(m *dpv1alpha1.VolumeBackupMember) Member {
	t := &m.Spec.Template
	out := Member{Namespace: m.Namespace, TCNamespace: m.Spec.TCNamespace, OwnerNamespace: m.Labels[dpv1alpha1.LabelOwnerNamespace],
		ServiceAccount: t.ServiceAccount, Env: t.Env, EnvPath: "spec.template.env"}
	out.image("spec.template.toolImage", t.ToolImage)
	out.template(t.AdditionalVolumes, t.AdditionalVolumeMounts)
	out.storage("spec.template", t.StorageProvider)
	return out
}

// ForRestore is what the policy judges of a VolumeRestoreMember restoring into a TidbCluster
// whose TiKV has, besides its data volume, the pod volumes otherTiKVVolumes (nil when the
// TidbCluster is not known yet): a warm-up reads those block by block.
func ForRestore(m *dpv1alpha1.VolumeRestoreMember, otherTiKVVolumes []string) Member {
	t := &m.Spec.Template
	out := Member{Namespace: m.Namespace, TCNamespace: m.Spec.TCNamespace, OwnerNamespace: m.Labels[dpv1alpha1.LabelOwnerNamespace],
		ServiceAccount: t.ServiceAccount, Env: t.Env, EnvPath: "spec.template.env"}
	out.image("spec.template.toolImage", t.ToolImage)
	if t.Check != nil {
		out.image("spec.template.check.image", t.Check.Image)
	}
	if t.Warmup != fedv1alpha1.RestoreWarmupNone {
		out.image("spec.template.warmupImage", t.WarmupImage)
		out.WarmupStrategy, out.BlockWarmup = string(t.EffectiveWarmupStrategy()), WarmupReadsBlocks(t.EffectiveWarmupStrategy(), otherTiKVVolumes)
	}
	out.template(t.AdditionalVolumes, t.AdditionalVolumeMounts)
	out.storage("spec.backup", m.Spec.Backup)
	return out
}

// WarmupReadsBlocks says why a warm-up with strategy, of a TiKV with the pod volumes other
// besides its data volume, reads block devices; "" when it reads none.
func WarmupReadsBlocks(strategy fedv1alpha1.RestoreWarmupStrategy, other []string) string {
	switch {
	case strategy == fedv1alpha1.RestoreWarmupStrategyFs:
		return ""
	case strategy == fedv1alpha1.RestoreWarmupStrategyFio:
		return "a fio warm-up reads every TiKV volume block by block"
	case len(other) > 0: // hybrid, fsr, check-wal-only
		return fmt.Sprintf("a %s warm-up reads the TiKV volumes besides the data volume (%s) block by block", strategy, strings.Join(other, ", "))
	}
	return ""
}

func (m *Member) image(field, image string) {
	if image != "" {
		m.Images = append(m.Images, Field{Path: field, Value: image})
	}
}

func (m *Member) template(volumes []corev1.Volume, mounts []corev1.VolumeMount) {
	for i, v := range volumes {
		m.Volumes = append(m.Volumes, Volume{Path: fmt.Sprintf("spec.template.additionalVolumes[%d]", i), Volume: v})
	}
	for i, v := range mounts {
		m.Mounts = append(m.Mounts, Mount{Path: fmt.Sprintf("spec.template.additionalVolumeMounts[%d]", i), Mount: v})
	}
}

func (m *Member) storage(field string, sp fedv1alpha1.StorageProvider) {
	if s := sp.S3; s != nil {
		l := S3Location{Path: field + ".s3", Bucket: s.Bucket, Prefix: s.Prefix}
		if s.Bucket == "" {
			// As job.StorageFor reads a path, joined without cleaning: path.Join would
			// hide a ".." from the policy.
			var rest string
			l.Bucket, rest, _ = strings.Cut(strings.TrimPrefix(s.Path, "s3://"), "/")
			if rest != "" && l.Prefix != "" {
				l.Prefix = rest + "/" + l.Prefix
			} else {
				l.Prefix = rest + l.Prefix
			}
		}
		m.S3 = &l
	}
	if sp.Local == nil {
		return
	}
	m.Volumes = append(m.Volumes, Volume{Path: field + ".local.volume", Volume: sp.Local.Volume})
	m.Mounts = append(m.Mounts, Mount{Path: field + ".local.volumeMount", Mount: sp.Local.VolumeMount})
}

// Check returns every rule m breaks, in a fixed order: namespaces, storage, images, service
// account, volumes, mounts, env, privilege.
func (p *Policy) Check(m Member) []Violation {
	var vs []Violation
	vs = append(vs, p.checkNamespaces(m)...)
	vs = append(vs, p.checkStorage(m)...)
	for _, img := range m.Images {
		if !p.imageAllowed(img.Value) {
			vs = append(vs, p.imageViolation(img.Path, img.Value))
		}
	}
	if m.ServiceAccount != "" && !p.serviceAccountAllowed(m.Namespace, m.ServiceAccount) {
		vs = append(vs, p.serviceAccountViolation("spec.template.serviceAccount", m.ServiceAccount))
	}
	for _, v := range m.Volumes {
		if v.Volume.HostPath != nil {
			if !p.c.HostPath {
				vs = append(vs, hostPathViolation(v.Path+".hostPath.path", v.Volume.HostPath.Path))
			}
			continue
		}
		if t := VolumeType(v.Volume.VolumeSource); !p.volumeTypeAllowed(t) {
			vs = append(vs, Violation{Rule: dpv1alpha1.VolumeTypeNotAllowedReason, Field: v.Path + "." + t, Value: v.Volume.Name,
				Why: fmt.Sprintf("a %s volume is not an allowed type (allowed: %s); refused unless --allowed-volume-types names it", t,
					strings.Join(append(slices.Clone(DefaultVolumeTypes), p.c.VolumeTypes...), ", "))})
		}
	}
	for _, mt := range m.Mounts {
		if identityMount(mt.Mount.MountPath) {
			vs = append(vs, identityMountViolation(mt.Path+".mountPath", mt.Mount.MountPath))
		}
	}
	for i, e := range m.Env {
		if v, ok := p.envViolation(e.Name); !ok {
			v.Field = fmt.Sprintf("%s[%d].name", m.EnvPath, i)
			vs = append(vs, v)
		}
	}
	if m.BlockWarmup != "" && !p.c.PrivilegedWarmup {
		vs = append(vs, Violation{Rule: dpv1alpha1.PrivilegedNotAllowedReason, Field: "spec.template.warmupStrategy", Value: m.WarmupStrategy,
			Why: m.BlockWarmup + ", which needs a privileged container; refused unless --allow-privileged-warmup"})
	}
	return vs
}

// checkNamespaces refuses a member whose control-plane namespace may not act on its namespace
// or its TidbCluster's.
func (p *Policy) checkNamespaces(m Member) []Violation {
	if m.OwnerNamespace == "" {
		return []Violation{{Rule: dpv1alpha1.NamespaceNotAllowedReason, Field: "metadata.labels[" + dpv1alpha1.LabelOwnerNamespace + "]",
			Why: "the member names no control-plane namespace; the manager labels every member it creates with its VolumeBackup's or VolumeRestore's"}}
	}
	var vs []Violation
	for _, f := range []Field{{Path: "metadata.namespace", Value: m.Namespace}, {Path: "spec.tcNamespace", Value: m.TCNamespace}} {
		if f.Path == "spec.tcNamespace" && f.Value == m.Namespace && len(vs) > 0 {
			continue // the same namespace, refused once
		}
		if !p.namespaceAllowed(m.OwnerNamespace, f.Value) {
			vs = append(vs, Violation{Rule: dpv1alpha1.NamespaceNotAllowedReason, Field: f.Path, Value: f.Value,
				Why: fmt.Sprintf("control-plane namespace %q may not act on this data-plane namespace (allowed: %s)", m.OwnerNamespace, p.namespacesAllowed())})
		}
	}
	return vs
}

// checkStorage refuses a member whose S3 storage lies under no storage root of its
// control-plane namespace, whose location names itself in more than one way or reads otherwise
// to the steps, or that names no control-plane namespace. A local storage is a volume, judged by the volume rules; an S3
// storage without a bucket is no location at all (InvalidStorage, when a step needs it).
func (p *Policy) checkStorage(m Member) []Violation {
	l := m.S3
	if l == nil || l.Bucket == "" {
		return nil
	}
	v := Violation{Rule: dpv1alpha1.StorageNotAllowedReason, Field: l.Path, Value: l.String()}
	segs, ok := segments(l.Prefix)
	switch {
	case m.OwnerNamespace == "":
		v.Why = "the member names no control-plane namespace, so no storage root is its own"
	case strings.ContainsAny(l.Bucket, "/?") || strings.Contains(l.Prefix, "?"):
		// The steps take --storage s3://BUCKET/PREFIX up to its first "?" (the query) and
		// its bucket up to the first "/": they would read another location than this one.
		v.Why = `a "/" in the bucket or a "?" in the location makes the steps read another location than the one judged; never allowed`
	case !ok:
		v.Why = `the prefix has an empty, "." or ".." segment (or a leading or trailing "/"), which names a location in more than one way; never allowed`
	case !p.storageAllowed(m.OwnerNamespace, l.Bucket, segs):
		v.Why = fmt.Sprintf("not under a storage root of control-plane namespace %q (allowed: %s); refused unless --allowed-storage names a root it lies under",
			m.OwnerNamespace, strings.Join(p.storageRoots(m.OwnerNamespace), ", "))
	default:
		return nil
	}
	return []Violation{v}
}

// namespacesAllowed describes the namespace rule for a message.
func (p *Policy) namespacesAllowed() string {
	var parts []string
	if p.c.SameNamespace {
		parts = append(parts, "the namespace of the same name")
	}
	for _, m := range p.c.Namespaces {
		parts = append(parts, "--allow-namespaces "+m)
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

func (p *Policy) imageViolation(field, image string) Violation {
	allowed := fmt.Sprintf("the agent's own %q", p.c.AgentImage)
	if len(p.c.Images) > 0 {
		allowed += " and --allowed-images " + strings.Join(p.c.Images, " ")
	}
	return Violation{Rule: dpv1alpha1.ImageNotAllowedReason, Field: field, Value: image, Why: "not an allowed image (allowed: " + allowed + ")"}
}

func (p *Policy) serviceAccountViolation(field, name string) Violation {
	allowed := fmt.Sprintf("the steps' own %q", p.c.StepServiceAccount)
	if len(p.c.ServiceAccounts) > 0 {
		allowed += " and --allowed-service-accounts " + strings.Join(p.c.ServiceAccounts, " ")
	}
	return Violation{Rule: dpv1alpha1.ServiceAccountNotAllowedReason, Field: field, Value: name,
		Why: "not an allowed service account: a pod may act with every right it holds (allowed: " + allowed + ")"}
}

func hostPathViolation(field, dir string) Violation {
	return Violation{Rule: dpv1alpha1.HostPathNotAllowedReason, Field: field, Value: dir,
		Why: "a hostPath volume opens the node's files to the pod; refused unless --allow-host-path"}
}

func identityMountViolation(field, dir string) Violation {
	return Violation{Rule: dpv1alpha1.IdentityMountNotAllowedReason, Field: field, Value: dir,
		Why: "this mount lies over the directory of the pod's identity token and would replace the steps' identity; never allowed"}
}

// DefaultEnv are the variables any template may set: the time zone and the Go runtime's resource
// knobs, none of which chooses what a step reads, trusts or where it sends anything.
var DefaultEnv = []string{"TZ", "GOMAXPROCS", "GOMEMLIMIT", "GOGC"}

// sensitivePrefixes and sensitiveNames are the variables that choose the steps' credentials, what
// they trust, where they send requests, or what code or files their process loads: the AWS SDK's
// configuration (keys, profile, role, web identity token file, container credentials, endpoints,
// region) and its files (HOME holds ~/.aws), fedbr's own (the lab root under which the
// service-account token is read), the Kubernetes client's (kubeconfig, API server address), the
// member a step reports to, the proxies and CA files that would let a third party read requests
// carrying the steps' credentials, the Go runtime's debug switches (GODEBUG turns TLS and X.509
// checks off) and the dynamic loader's (LD_PRELOAD). Names are compared case-insensitively
// (proxies are read in lower case too). --allowed-env allows one only by its exact name.
var (
	sensitivePrefixes = []string{"AWS_", "FEDBR_", "LD_", "SSL_", "KUBERNETES_", "GODEBUG", "GOTRACEBACK"}
	sensitiveNames    = []string{"HOME", "KUBECONFIG", "POD_NAMESPACE", "POD_NAME", "PATH", "TMPDIR",
		"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE"}
)

// SensitiveEnv says whether a variable is one of the sensitive ones.
func SensitiveEnv(name string) bool {
	n := strings.ToUpper(name)
	return slices.Contains(sensitiveNames, n) || slices.ContainsFunc(sensitivePrefixes, func(p string) bool { return strings.HasPrefix(n, p) })
}

// envViolation judges a template variable: allowed when DefaultEnv names it or an --allowed-env
// pattern matches it, a sensitive one only when --allowed-env names it exactly.
func (p *Policy) envViolation(name string) (Violation, bool) {
	if SensitiveEnv(name) {
		if slices.Contains(p.c.Env, name) {
			return Violation{}, true
		}
		return Violation{Rule: dpv1alpha1.CredentialEnvNotAllowedReason, Value: name,
			Why: "this variable chooses the steps' credentials, what they trust, where they send requests or what their process loads; " +
				"refused unless --allowed-env names it exactly"}, false
	}
	if slices.Contains(DefaultEnv, name) || matchAny(p.c.Env, name) {
		return Violation{}, true
	}
	return Violation{Rule: dpv1alpha1.EnvNotAllowedReason, Value: name,
		Why: fmt.Sprintf("not an allowed variable (allowed: %s); refused unless --allowed-env names it", strings.Join(append(slices.Clone(DefaultEnv), p.c.Env...), ", "))}, false
}

// DefaultVolumeTypes are the volume types any template's volumes may have: a scratch directory,
// a ConfigMap or Secret of the member's own namespace, and a claim there. Every other type can
// reach beyond that namespace's objects or write pod-chosen content into files a library reads
// on its own (downwardAPI and projected write the pod's annotations, for one).
var DefaultVolumeTypes = []string{"emptyDir", "configMap", "secret", "persistentVolumeClaim"}

// volumeTypes are the types of corev1.VolumeSource, by their JSON field.
var volumeTypes = []string{"hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret", "nfs", "iscsi",
	"glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "downwardAPI", "fc", "azureFile",
	"configMap", "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "projected", "portworxVolume", "scaleIO",
	"storageos", "csi", "ephemeral", "image"}

// VolumeType is the JSON field of the volume source that is set: emptyDir when none is (as the
// API server defaults a pod's volume), and the fields joined by "+" when several are (which no
// allowlist names: the API server would refuse such a pod, the policy refuses the member first).
func VolumeType(v corev1.VolumeSource) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "invalid"
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil {
		return "invalid"
	}
	if len(fields) == 0 {
		return "emptyDir"
	}
	keys := slices.Sorted(maps.Keys(fields))
	return strings.Join(keys, "+")
}

func (p *Policy) volumeTypeAllowed(t string) bool {
	return slices.Contains(DefaultVolumeTypes, t) || slices.Contains(p.c.VolumeTypes, t)
}

// identityDirs hold the tokens a pod's identities are read from: its Kubernetes service
// account, EKS's web identity token (IRSA) and EKS Pod Identity's token; /var/run is /run in
// most images.
var identityDirs = []string{
	"/var/run/secrets/kubernetes.io", "/var/run/secrets/eks.amazonaws.com", "/var/run/secrets/pods.eks.amazonaws.com",
	"/run/secrets/kubernetes.io", "/run/secrets/eks.amazonaws.com", "/run/secrets/pods.eks.amazonaws.com",
}

// identityMount says a mount at dir replaces an identity token: it is one of identityDirs or
// below one, once cleaned (a path the admission rule's prefix test does not see as such,
// /var/run//secrets/… or /var/run/x/../secrets/…, is caught here).
func identityMount(dir string) bool {
	c := path.Clean("/" + dir)
	return slices.ContainsFunc(identityDirs, func(d string) bool { return c == d || strings.HasPrefix(c, d+"/") })
}

// ForeignJobs are the violations of Jobs that carry a member's labels without being its own
// (job.Owned): the member fails rather than adopt them or read their outcome.
func ForeignJobs(names []string) []Violation {
	vs := make([]Violation, 0, len(names))
	for _, n := range names {
		vs = append(vs, Violation{Rule: dpv1alpha1.ForeignJobReason, Field: "Job", Value: n,
			Why: "carries the member's labels but is not controlled by it: the agent never adopts a Job it did not create; delete it and create the member again"})
	}
	return vs
}
