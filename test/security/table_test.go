package security

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// The CEL messages admission refuses with (api/federation/v1alpha1).
const (
	celHostPath = "additionalVolumes cannot be hostPath volumes"
	celMount    = "additionalVolumeMounts cannot mount over /var/run/secrets/kubernetes.io"
	celEnv      = "env cannot set POD_NAMESPACE, POD_NAME, KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT or FEDBR_* variables"
	celPriority = "priorityClassName cannot be a system- priority class"
	celExitVol  = "additionalVolumes cannot be named fedbr-exit"
	celExitDir  = "additionalVolumeMounts cannot mount at or under /var/run/fedbr-exit"
)

// table is the proof: every hostile or careless input the API can express that touches what
// runs in a data plane, and what it gets. Fields the API cannot express (hostNetwork, hostPID,
// hostIPC, privileged, capabilities, any securityContext, hostPort, command, extra containers,
// envFrom) have no row; the agent's pod check refuses them all the same should a builder ever
// produce them (internal/agent/policy, internal/agent/job).
func table() []row {
	// s3 is a storage under control-plane namespace ns's own prefix, as the agent's default
	// policy wants it (--allowed-storage s3://*/{namespace}).
	s3 := func(ns string) fedv1alpha1.StorageProvider {
		return fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "backups", Prefix: ns + "/p"}}
	}
	hostPath := func(dir string) corev1.Volume {
		return corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}}}
	}
	local := func(v corev1.Volume, mountPath string) fedv1alpha1.StorageProvider {
		return fedv1alpha1.StorageProvider{Local: &fedv1alpha1.LocalStorageProvider{Volume: v, VolumeMount: corev1.VolumeMount{Name: v.Name, MountPath: mountPath}}}
	}
	emptyDir := corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	env := func(kv ...string) []corev1.EnvVar {
		var out []corev1.EnvVar
		for _, e := range kv {
			k, v, _ := strings.Cut(e, "=")
			out = append(out, corev1.EnvVar{Name: k, Value: v})
		}
		return out
	}
	// backup is a VolumeBackup in control-plane namespace ns of the TidbCluster name in the
	// data-plane namespace of the same name, unless mut says otherwise.
	backup := func(ns, name string, mut func(*fedv1alpha1.VolumeBackup)) *fedv1alpha1.VolumeBackup {
		b := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: fedv1alpha1.VolumeBackupSpec{Clusters: []fedv1alpha1.VolumeBackupMemberCluster{{K8sClusterName: plane, TCName: name, TCNamespace: ns}},
				Template: fedv1alpha1.VolumeBackupMemberSpec{StorageProvider: s3(ns)}}}
		if mut != nil {
			mut(b)
		}
		return b
	}
	tmpl := func(ns, name string, mut func(*fedv1alpha1.VolumeBackupMemberSpec)) *fedv1alpha1.VolumeBackup {
		return backup(ns, name, func(b *fedv1alpha1.VolumeBackup) { mut(&b.Spec.Template) })
	}
	restore := func(ns, name string, mut func(*fedv1alpha1.VolumeRestore)) *fedv1alpha1.VolumeRestore {
		r := &fedv1alpha1.VolumeRestore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: fedv1alpha1.VolumeRestoreSpec{Clusters: []fedv1alpha1.VolumeRestoreMemberCluster{{K8sClusterName: plane, TCName: name, TCNamespace: ns, Backup: s3(ns)}}}}
		if mut != nil {
			mut(r)
		}
		return r
	}
	rtmpl := func(ns, name string, mut func(*fedv1alpha1.VolumeRestoreMemberSpec)) *fedv1alpha1.VolumeRestore {
		return restore(ns, name, func(r *fedv1alpha1.VolumeRestore) { mut(&r.Spec.Template) })
	}
	// member is a VolumeBackupMember written straight into the data plane, not by the manager;
	// owner is its owner-namespace label ("" for none).
	member := func(ns, name, owner string, mut func(*dpv1alpha1.VolumeBackupMember)) *dpv1alpha1.VolumeBackupMember {
		m := &dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: name, K8sClusterName: plane, TCName: name, TCNamespace: ns,
				Phase: dpv1alpha1.BackupMemberInitialize, Template: fedv1alpha1.VolumeBackupMemberSpec{StorageProvider: s3(ns)}}}
		if owner != "" {
			m.Labels = map[string]string{dpv1alpha1.LabelOwnerNamespace: owner}
		}
		if mut != nil {
			mut(m)
		}
		return m
	}
	restoreMember := func(ns, name, owner string, mut func(*dpv1alpha1.VolumeRestoreMember)) *dpv1alpha1.VolumeRestoreMember {
		m := &dpv1alpha1.VolumeRestoreMember{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{dpv1alpha1.LabelOwnerNamespace: owner}},
			Spec: dpv1alpha1.VolumeRestoreMemberSpec{VolumeRestore: name, K8sClusterName: plane, TCName: name, TCNamespace: ns,
				Phase: dpv1alpha1.RestoreMemberRestoreVolume, Backup: s3(owner)}}
		if mut != nil {
			mut(m)
		}
		return m
	}
	schedule := &fedv1alpha1.VolumeBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "nightly-host"},
		Spec: fedv1alpha1.VolumeBackupScheduleSpec{Schedule: "0 3 * * *", BackupTemplate: tmpl("team-a", "x", func(t *fedv1alpha1.VolumeBackupMemberSpec) {
			t.AdditionalVolumes = []corev1.Volume{hostPath("/etc")}
		}).Spec}}
	digest := "@sha256:" + strings.Repeat("ab", 32)

	return []row{
		// Refused at admission: values that never make sense, whatever the policy.
		{name: "backup sends its metadata to another S3 endpoint", outcome: admission, want: "s3.endpoint is not honoured",
			input: tmpl("team-a", "a-s3-endpoint", func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.StorageProvider = fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "backups", Endpoint: "https://attacker.example.com"}}
			})},
		{name: "backup asks for an encryption fedbr would silently not apply", outcome: admission, want: "s3.sse is not honoured",
			input: tmpl("team-a", "a-s3-sse", func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.StorageProvider = fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "backups", SSE: "aws:kms"}}
			})},
		{name: "restore reads its backup from a MinIO flavour of S3", outcome: admission, want: "s3.provider: only aws is supported",
			input: restore("team-a", "a-s3-minio", func(r *fedv1alpha1.VolumeRestore) {
				r.Spec.Clusters[0].Backup = fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "minio", Bucket: "backups"}}
			})},
		{name: "backup keeps its metadata in GCS (careless)", outcome: admission, want: "gcs is not supported",
			input: tmpl("team-a", "a-gcs", func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.StorageProvider = fedv1alpha1.StorageProvider{Gcs: &fedv1alpha1.GcsStorageProvider{ProjectId: "p", Bucket: "backups"}}
			})},
		{name: "backup mounts the node's root by hostPath", outcome: admission, want: celHostPath,
			input: tmpl("team-a", "a-hostpath", func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.AdditionalVolumes = []corev1.Volume{hostPath("/")} })},
		{name: "restore mounts the container runtime's socket", outcome: admission, want: celHostPath,
			input: rtmpl("team-a", "a-docker-sock", func(t *fedv1alpha1.VolumeRestoreMemberSpec) {
				t.AdditionalVolumes = []corev1.Volume{hostPath("/var/run/docker.sock")}
			})},
		{name: "schedule's backup template mounts a hostPath", outcome: admission, want: celHostPath, input: schedule},
		{name: "forged backup member mounts a hostPath", outcome: admission, want: celHostPath,
			input: member("team-a", "a-member-hostpath", "team-a", func(m *dpv1alpha1.VolumeBackupMember) {
				m.Spec.Template.AdditionalVolumes = []corev1.Volume{hostPath("/var/lib/kubelet")}
			})},
		{name: "backup mounts another identity's token over the service-account token", outcome: admission, want: celMount,
			input: tmpl("team-a", "a-sa-token", func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.AdditionalVolumes = []corev1.Volume{{Name: "stolen", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "admin-token"}}}}
				t.AdditionalVolumeMounts = []corev1.VolumeMount{{Name: "stolen", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}
			})},
		{name: "restore mounts over the IRSA web identity token", outcome: admission, want: celMount,
			input: rtmpl("team-a", "a-irsa-token", func(t *fedv1alpha1.VolumeRestoreMemberSpec) {
				t.AdditionalVolumes = []corev1.Volume{emptyDir}
				t.AdditionalVolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/var/run/secrets/eks.amazonaws.com/serviceaccount"}}
			})},
		{name: "backup points its steps at another namespace's members", outcome: admission, want: celEnv,
			input: tmpl("team-a", "a-pod-namespace", func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.Env = env("POD_NAMESPACE=kube-system") })},
		{name: "restore points its steps at another API server", outcome: admission, want: celEnv,
			input: rtmpl("team-a", "a-api-server", func(t *fedv1alpha1.VolumeRestoreMemberSpec) { t.Env = env("KUBERNETES_SERVICE_HOST=10.0.0.66") })},
		{name: "backup moves fedbr's own root", outcome: admission, want: celEnv,
			input: tmpl("team-a", "a-fedbr-root", func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.Env = env("FEDBR_LAB_ROOT=/tmp/evil") })},
		{name: "backup preempts the cluster's critical pods", outcome: admission, want: celPriority,
			input: tmpl("team-a", "a-priority", func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.PriorityClassName = "system-node-critical" })},
		{name: "forged restore member preempts the cluster's critical pods", outcome: admission, want: celPriority,
			input: restoreMember("team-a", "a-member-priority", "team-a", func(m *dpv1alpha1.VolumeRestoreMember) {
				m.Spec.Template.PriorityClassName = "system-cluster-critical"
			})},
		{name: "backup replaces the exit marker's volume a sidecar waits on", outcome: admission, want: celExitVol,
			input: tmpl("team-a", "a-exit-volume", func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.AdditionalVolumes = []corev1.Volume{{Name: "fedbr-exit", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			})},
		{name: "restore hides the exit marker under its own mount", outcome: admission, want: celExitDir,
			input: rtmpl("team-a", "a-exit-dir", func(t *fedv1alpha1.VolumeRestoreMemberSpec) {
				t.AdditionalVolumes = []corev1.Volume{emptyDir}
				t.AdditionalVolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/var/run/fedbr-exit"}}
			})},

		// Refused by the agent's policy, with the rule's name.
		{name: "a Job planted with the member's labels and its pause step's name is not adopted", outcome: refused, want: dpv1alpha1.ForeignJobReason,
			names: "fed-planted-pause", setup: both(seedTC("team-a", "planted"), plantJob("team-a", "fed-planted")), input: backup("team-a", "planted", nil)},
		{name: "backup runs a foreign image", outcome: refused, want: dpv1alpha1.ImageNotAllowedReason,
			names: `spec.template.toolImage "evil.example.com/fedbr:v1"`,
			input: tmpl("team-a", "p-foreign-image", func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.ToolImage = "evil.example.com/fedbr:v1" })},
		{name: "backup runs an image by digest from another registry", outcome: refused, want: dpv1alpha1.ImageNotAllowedReason,
			names: `spec.template.toolImage "ghcr.io/attacker/fedbr` + digest + `"`,
			input: tmpl("team-a", "p-digest", func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.ToolImage = "ghcr.io/attacker/fedbr" + digest })},
		{name: "backup names the agent's image another way (careless)", outcome: refused, want: dpv1alpha1.ImageNotAllowedReason,
			names: `spec.template.toolImage "docker.io/library/fedbr:test"`,
			input: tmpl("team-a", "p-image-spelling", func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.ToolImage = "docker.io/library/fedbr:test" })},
		{name: "backup runs a look-alike repository of the allowed registry", outcome: refused, want: dpv1alpha1.ImageNotAllowedReason,
			names: `spec.template.toolImage "registry.example.com/fedbr-evil:v1"`,
			input: tmpl("team-a", "p-lookalike", func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.ToolImage = "registry.example.com/fedbr-evil:v1" })},
		{name: "restore warms up with a foreign image", outcome: refused, want: dpv1alpha1.ImageNotAllowedReason,
			names: `spec.template.warmupImage "evil.example.com/warm:1"`,
			input: rtmpl("team-a", "p-warmup-image", func(t *fedv1alpha1.VolumeRestoreMemberSpec) {
				t.Warmup, t.WarmupImage = fedv1alpha1.RestoreWarmupSync, "evil.example.com/warm:1"
			})},
		{name: "restore asks for a privileged fio warm-up without --allow-privileged-warmup", outcome: refused, want: dpv1alpha1.PrivilegedNotAllowedReason,
			names: `spec.template.warmupStrategy "fio"`,
			input: rtmpl("team-a", "p-fio", func(t *fedv1alpha1.VolumeRestoreMemberSpec) {
				t.Warmup, t.WarmupStrategy = fedv1alpha1.RestoreWarmupSync, fedv1alpha1.RestoreWarmupStrategyFio
			})},
		{name: "restore's hybrid warm-up would read a raft volume's device", outcome: refused, want: dpv1alpha1.PrivilegedNotAllowedReason,
			names: `spec.template.warmupStrategy "hybrid": a hybrid warm-up reads the TiKV volumes besides the data volume (tikv-raft)`,
			setup: seedTC("team-a", "p-hybrid-raft", "raft"),
			input: rtmpl("team-a", "p-hybrid-raft", func(t *fedv1alpha1.VolumeRestoreMemberSpec) { t.Warmup = fedv1alpha1.RestoreWarmupAsync })},
		{name: "backup runs as a foreign service account", outcome: refused, want: dpv1alpha1.ServiceAccountNotAllowedReason,
			names: `spec.template.serviceAccount "tidb-admin"`,
			input: tmpl("team-a", "p-service-account", func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.ServiceAccount = "tidb-admin" })},
		{name: "restore runs as the namespace's default service account", outcome: refused, want: dpv1alpha1.ServiceAccountNotAllowedReason,
			names: `spec.template.serviceAccount "default"`,
			input: rtmpl("team-a", "p-default-sa", func(t *fedv1alpha1.VolumeRestoreMemberSpec) { t.ServiceAccount = "default" })},
		{name: "backup injects static AWS keys", outcome: refused, want: dpv1alpha1.CredentialEnvNotAllowedReason,
			names: `spec.template.env[0].name "AWS_ACCESS_KEY_ID"`,
			input: tmpl("team-a", "p-aws-keys", func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.Env = env("AWS_ACCESS_KEY_ID=AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY=secret")
			})},
		{name: "backup assumes another role by web identity", outcome: refused, want: dpv1alpha1.CredentialEnvNotAllowedReason,
			names: `spec.template.env[1].name "AWS_WEB_IDENTITY_TOKEN_FILE"`,
			input: tmpl("team-a", "p-aws-role", func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.Env = env("AWS_ROLE_ARN=arn:aws:iam::111122223333:role/admin", "AWS_WEB_IDENTITY_TOKEN_FILE=/tmp/token")
			})},
		{name: "backup sends EC2 calls to another endpoint", outcome: refused, want: dpv1alpha1.CredentialEnvNotAllowedReason,
			names: `spec.template.env[0].name "AWS_ENDPOINT_URL_EC2"`,
			input: tmpl("team-a", "p-aws-endpoint", func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.Env = env("AWS_ENDPOINT_URL_EC2=http://collector.example.com")
			})},
		{name: "restore routes its steps through a proxy", outcome: refused, want: dpv1alpha1.CredentialEnvNotAllowedReason,
			names: `spec.template.env[0].name "HTTPS_PROXY"`,
			input: rtmpl("team-a", "p-proxy", func(t *fedv1alpha1.VolumeRestoreMemberSpec) { t.Env = env("HTTPS_PROXY=http://mitm.example.com:3128") })},
		{name: "backup's steps read another kubeconfig", outcome: refused, want: dpv1alpha1.CredentialEnvNotAllowedReason,
			names: `spec.template.env[0].name "KUBECONFIG"`,
			input: tmpl("team-a", "p-kubeconfig", func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.Env = env("KUBECONFIG=/scratch/admin.conf") })},
		{name: "backup stores its metadata on the node's root (local storage, hostPath)", outcome: refused, want: dpv1alpha1.HostPathNotAllowedReason,
			names: `spec.template.local.volume.hostPath.path "/"`,
			input: tmpl("team-a", "p-local-root", func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.StorageProvider = local(hostPath("/"), "/backup") })},
		{name: "restore reads its backup from the kubelet's directory (its steps would mount it)", outcome: refused, want: dpv1alpha1.HostPathNotAllowedReason,
			names: `spec.backup.local.volume.hostPath.path "/var/lib/kubelet"`,
			input: restore("team-a", "p-local-kubelet", func(r *fedv1alpha1.VolumeRestore) {
				r.Spec.Clusters[0].Backup = local(hostPath("/var/lib/kubelet"), "/backup")
			})},
		{name: "backup mounts over the token by a path admission does not see as such", outcome: refused, want: dpv1alpha1.IdentityMountNotAllowedReason,
			names: `spec.template.additionalVolumeMounts[0].mountPath "/var/run//secrets/kubernetes.io/serviceaccount"`,
			input: tmpl("team-a", "p-token-path", func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.AdditionalVolumes = []corev1.Volume{emptyDir}
				t.AdditionalVolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/var/run//secrets/kubernetes.io/serviceaccount"}}
			})},
		{name: "backup mounts its local storage over the token", outcome: refused, want: dpv1alpha1.IdentityMountNotAllowedReason,
			names: `spec.template.local.volumeMount.mountPath "/var/run/secrets/kubernetes.io/serviceaccount"`,
			input: tmpl("team-a", "p-storage-token", func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.StorageProvider = local(corev1.Volume{Name: "stolen", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "admin-token"}}},
					"/var/run/secrets/kubernetes.io/serviceaccount")
			})},
		{name: "backup of a TidbCluster in another team's namespace", outcome: refused, want: dpv1alpha1.NamespaceNotAllowedReason,
			names: `metadata.namespace "team-b": control-plane namespace "team-a" may not act`,
			input: backup("team-a", "p-other-team", func(b *fedv1alpha1.VolumeBackup) { b.Spec.Clusters[0].TCNamespace = "team-b" })},
		{name: "restore into kube-system", outcome: refused, want: dpv1alpha1.NamespaceNotAllowedReason,
			names: `metadata.namespace "kube-system"`,
			input: restore("team-a", "p-kube-system", func(r *fedv1alpha1.VolumeRestore) { r.Spec.Clusters[0].TCNamespace = "kube-system" })},
		{name: "a mapped namespace acts only where it is mapped", outcome: refused, want: dpv1alpha1.NamespaceNotAllowedReason,
			names: `metadata.namespace "team-a": control-plane namespace "ops" may not act`,
			input: backup("ops", "p-ops-team-a", func(b *fedv1alpha1.VolumeBackup) { b.Spec.Clusters[0].TCNamespace = "team-a" })},
		{name: "forged backup member without an owner", outcome: refused, want: dpv1alpha1.NamespaceNotAllowedReason,
			names: `metadata.labels[dataplane.fedbr.io/owner-namespace] ""`, input: member("team-a", "p-no-owner", "", nil)},
		{name: "forged backup member naming a TidbCluster namespace not mapped", outcome: refused, want: dpv1alpha1.NamespaceNotAllowedReason,
			names: `spec.tcNamespace "team-b"`,
			input: member("team-a", "p-member-tc-ns", "team-a", func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.TCNamespace = "team-b" })},
		{name: "forged restore member claiming another control-plane namespace", outcome: refused, want: dpv1alpha1.NamespaceNotAllowedReason,
			names: `metadata.namespace "team-b": control-plane namespace "team-a" may not act`, input: restoreMember("team-b", "p-member-owner", "team-a", nil)},
		{name: "restore names another tenant's prefix (it would read that tenant's backupmeta and restore its snapshots)", outcome: refused,
			want: dpv1alpha1.StorageNotAllowedReason, names: `spec.backup.s3 "s3://backups/team-b/nightly-dp1": not under a storage root of control-plane namespace "team-a"`,
			input: restore("team-a", "p-other-prefix", func(r *fedv1alpha1.VolumeRestore) {
				r.Spec.Clusters[0].Backup = fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "backups", Prefix: "team-b/nightly-dp1"}}
			})},
		{name: "restore climbs out of its own prefix by ..", outcome: refused, want: dpv1alpha1.StorageNotAllowedReason,
			names: `spec.backup.s3 "s3://backups/team-a/../team-b/nightly-dp1": the prefix has an empty, "." or ".." segment`,
			input: restore("team-a", "p-dotdot-prefix", func(r *fedv1alpha1.VolumeRestore) {
				r.Spec.Clusters[0].Backup = fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Path: "s3://backups/team-a/../team-b", Prefix: "nightly-dp1"}}
			})},
		{name: "backup's prefix is its namespace's name alone: its member writes beside it, under team-a-dp1 (careless)", outcome: refused,
			want: dpv1alpha1.StorageNotAllowedReason, names: `spec.template.s3 "s3://backups/team-a-dp1"`,
			input: tmpl("team-a", "p-lookalike-prefix", func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.StorageProvider = fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "backups", Prefix: "team-a"}}
			})},
		{name: "backup breaking several rules: the first is the reason, the message names each", outcome: refused, want: dpv1alpha1.ImageNotAllowedReason,
			names: `spec.template.serviceAccount "tidb-admin"`,
			input: tmpl("team-a", "p-several", func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.ToolImage, t.ServiceAccount, t.Env = "evil.example.com/fedbr:v1", "tidb-admin", env("AWS_PROFILE=admin")
			})},

		// Issue 38: what could redirect the steps' AWS SDK (HOME and a file written from an
		// annotation by a downward-API volume: ~/.aws/config naming another STS), or change what
		// their process trusts or loads, or reach beyond the namespace's own objects.
		{name: "backup steers the AWS SDK to a config file of its own (HOME, an annotation written by a downward-API volume)", outcome: refused,
			want:  dpv1alpha1.VolumeTypeNotAllowedReason, // the first rule broken; the message names the rest
			names: `spec.template.env[0].name "HOME"`,
			input: backup("team-a", "p-aws-config", func(b *fedv1alpha1.VolumeBackup) {
				b.Annotations = map[string]string{"x": "[default]\nservices = s\n[services s]\nsts =\n  endpoint_url = https://attacker.example.com\n"}
				t := &b.Spec.Template
				t.Env = env("HOME=/h")
				t.AdditionalVolumes = []corev1.Volume{{Name: "aws-config", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
					Items: []corev1.DownwardAPIVolumeFile{{Path: "config", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['x']"}}}}}}}
				t.AdditionalVolumeMounts = []corev1.VolumeMount{{Name: "aws-config", MountPath: "/h/.aws"}}
			})},
		{name: "backup writes its annotations into the pod's files (downward API)", outcome: refused, want: dpv1alpha1.VolumeTypeNotAllowedReason,
			names: `spec.template.additionalVolumes[0].downwardAPI "meta": a downwardAPI volume is not an allowed type`,
			input: tmpl("team-a", "p-downward-api", func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.AdditionalVolumes = []corev1.Volume{{Name: "meta", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}}}
			})},
		{name: "restore projects a token of another audience", outcome: refused, want: dpv1alpha1.VolumeTypeNotAllowedReason,
			names: `spec.template.additionalVolumes[0].projected "token"`,
			input: rtmpl("team-a", "p-projected", func(t *fedv1alpha1.VolumeRestoreMemberSpec) {
				t.AdditionalVolumes = []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "vault", Path: "t"}}}}}}}
			})},
		{name: "backup mounts a CSI secrets store", outcome: refused, want: dpv1alpha1.VolumeTypeNotAllowedReason,
			names: `spec.template.additionalVolumes[0].csi "secrets"`,
			input: tmpl("team-a", "p-csi", func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.AdditionalVolumes = []corev1.Volume{{Name: "secrets", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io"}}}}
			})},
		{name: "restore mounts an NFS share off the cluster", outcome: refused, want: dpv1alpha1.VolumeTypeNotAllowedReason,
			names: `spec.template.additionalVolumes[0].nfs "share"`,
			input: rtmpl("team-a", "p-nfs", func(t *fedv1alpha1.VolumeRestoreMemberSpec) {
				t.AdditionalVolumes = []corev1.Volume{{Name: "share", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "10.0.0.9", Path: "/"}}}}
			})},
		{name: "backup turns the Go runtime's TLS checks off", outcome: refused, want: dpv1alpha1.CredentialEnvNotAllowedReason,
			names: `spec.template.env[0].name "GODEBUG"`,
			input: tmpl("team-a", "p-godebug", func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.Env = env("GODEBUG=x509sha1=1,tlsrsakex=1") })},
		{name: "restore preloads a library into its steps", outcome: refused, want: dpv1alpha1.CredentialEnvNotAllowedReason,
			names: `spec.template.env[0].name "LD_PRELOAD"`,
			input: rtmpl("team-a", "p-ld-preload", func(t *fedv1alpha1.VolumeRestoreMemberSpec) { t.Env = env("LD_PRELOAD=/scratch/hook.so") })},
		{name: "backup trusts a CA directory of its own", outcome: refused, want: dpv1alpha1.CredentialEnvNotAllowedReason,
			names: `spec.template.env[0].name "SSL_CERT_DIR"`,
			input: tmpl("team-a", "p-ca-dir", func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.Env = env("SSL_CERT_DIR=/scratch") })},
		{name: "restore sets a variable the operator did not list", outcome: refused, want: dpv1alpha1.EnvNotAllowedReason,
			names: `spec.template.env[0].name "BR_EXTRA"`,
			input: rtmpl("team-a", "p-unlisted-env", func(t *fedv1alpha1.VolumeRestoreMemberSpec) { t.Env = env("BR_EXTRA=1") })},

		// Within policy: what the operator allowed runs.
		{name: "backup pins an image the operator allowed by pattern", outcome: allowed, want: "registry.example.com/fedbr:v2",
			setup: seedTC("team-a", "ok-pinned-image"),
			input: tmpl("team-a", "ok-pinned-image", func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.ToolImage = "registry.example.com/fedbr:v2" })},
		{name: "backup from a control-plane namespace the operator mapped", outcome: allowed, want: agentImage,
			setup: seedTC("team-b", "ok-mapped"),
			input: backup("ops", "ok-mapped", func(b *fedv1alpha1.VolumeBackup) { b.Spec.Clusters[0].TCNamespace = "team-b" })},
		{name: "backup asking for sidecars: its step pods carry the IAM role annotation, no injector's", outcome: allowed, want: agentImage,
			setup: seedTC("team-a", "ok-sidecars"), podAnnotations: map[string]string{"iam.amazonaws.com/role": "fedbr-steps"},
			input: backup("team-a", "ok-sidecars", func(b *fedv1alpha1.VolumeBackup) {
				b.Annotations = map[string]string{"iam.amazonaws.com/role": "fedbr-steps", "sidecar.istio.io/inject": "true",
					"vault.hashicorp.com/agent-inject": "true", "eks.amazonaws.com/skip-containers": "br"}
			})},
		{name: "backup labelled for a sidecar injector and a workload identity: its step pods carry none of its labels", outcome: allowed, want: agentImage,
			setup: seedTC("team-a", "ok-labels"), podLabelsAbsent: []string{"istio.io/rev", "sidecar.istio.io/inject", "azure.workload.identity/use", "team"},
			input: backup("team-a", "ok-labels", func(b *fedv1alpha1.VolumeBackup) {
				b.Labels = map[string]string{"istio.io/rev": "canary", "sidecar.istio.io/inject": "true", "azure.workload.identity/use": "true", "team": "db"}
			})},
		{name: "a copied backupmeta names another tenant's snapshots: the restore may use only its own namespaces' (the step refuses the rest)", outcome: allowed,
			want: agentImage, sourceNamespaces: "team-a", setup: seedTC("team-a", "ok-copied-meta"), input: restore("team-a", "ok-copied-meta", nil)},
		{name: "backup with harmless env, a scratch volume and the steps' own service account named", outcome: allowed, want: agentImage,
			setup: seedTC("team-a", "ok-harmless"),
			input: tmpl("team-a", "ok-harmless", func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.Env, t.ServiceAccount, t.ToolImage = env("TZ=UTC", "GOMAXPROCS=2"), "fedbr-br", agentImage
				t.AdditionalVolumes = []corev1.Volume{emptyDir}
				t.AdditionalVolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
			})},
	}
}
