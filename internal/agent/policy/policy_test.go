package policy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

const agentImage = "registry.example.com/fedbr:v1"

func mustNew(t *testing.T, c Config) *Policy {
	t.Helper()
	c.AgentImage, c.StepServiceAccount = agentImage, "fedbr-br"
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    Config
		want string
	}{
		{"mapping without =", Config{Namespaces: []string{"team-a"}}, `--allow-namespaces "team-a": want CONTROL_NAMESPACE=DATA_NAMESPACE`},
		{"mapping without data namespaces", Config{Namespaces: []string{"team-a= ,"}}, `--allow-namespaces "team-a= ,"`},
		{"mapping without control namespace", Config{Namespaces: []string{"=tidb"}}, `--allow-namespaces "=tidb"`},
		{"bad namespace glob", Config{Namespaces: []string{"team-[a=tidb"}}, `--allow-namespaces "team-[a": not a glob pattern`},
		{"bad image glob", Config{Images: []string{"registry.example.com/[fedbr"}}, `--allowed-images "registry.example.com/[fedbr": not a glob pattern`},
		{"empty image pattern", Config{Images: []string{" "}}, "--allowed-images: an empty pattern"},
		{"service account with two slashes", Config{ServiceAccounts: []string{"a/b/c"}}, `--allowed-service-accounts "a/b/c": want NAME or NAMESPACE/NAME`},
		{"bad env glob", Config{Env: []string{"AWS_\\"}}, `--allowed-env "AWS_\\": not a glob pattern`},
		{"unknown volume type", Config{VolumeTypes: []string{"downwardApi"}}, `--allowed-volume-types "downwardApi": not a volume type`},
		{"hostPath as a volume type", Config{VolumeTypes: []string{"hostPath"}}, "--allowed-volume-types hostPath: hostPath volumes are --allow-host-path's"},
		{"storage root without the s3 scheme", Config{Storage: []string{"bk/{namespace}"}}, `--allowed-storage "bk/{namespace}": want s3://BUCKET_GLOB[/PREFIX]`},
		{"storage root without a bucket", Config{Storage: []string{"s3:///{namespace}"}}, `--allowed-storage "s3:///{namespace}": the bucket pattern is empty`},
		{"empty storage root", Config{Storage: []string{" "}}, "--allowed-storage: an empty pattern"},
		{"bad bucket glob", Config{Storage: []string{"s3://bk-[/{namespace}"}}, `--allowed-storage "s3://bk-[/{namespace}": bucket pattern "bk-[" is not a glob pattern`},
		{"{namespace} in the bucket", Config{Storage: []string{"s3://{namespace}/x"}}, `--allowed-storage "s3://{namespace}/x": {namespace} stands only for a whole segment of the prefix`},
		{"{namespace} inside a segment", Config{Storage: []string{"s3://bk/ns-{namespace}"}}, `--allowed-storage "s3://bk/ns-{namespace}": {namespace} stands only for a whole segment of the prefix`},
		{"empty prefix segment", Config{Storage: []string{"s3://bk/tenants//{namespace}"}}, `--allowed-storage "s3://bk/tenants//{namespace}": the prefix has an empty, "." or ".." segment`},
		{"dot-dot prefix segment", Config{Storage: []string{"s3://bk/{namespace}/.."}}, `--allowed-storage "s3://bk/{namespace}/..": the prefix has an empty, "." or ".." segment`},
		{"dot prefix segment", Config{Storage: []string{"s3://bk/./{namespace}"}}, `--allowed-storage "s3://bk/./{namespace}": the prefix has an empty, "." or ".." segment`},
		{"prefix with a leading slash", Config{Storage: []string{"s3://bk//{namespace}"}}, `--allowed-storage "s3://bk//{namespace}": the prefix has an empty, "." or ".." segment`},
		{"a glob in the prefix", Config{Storage: []string{"s3://bk/team-*"}}, `--allowed-storage "s3://bk/team-*": the prefix is literal`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.AgentImage, tt.c.StepServiceAccount = agentImage, "fedbr-br"
			_, err := New(tt.c)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "image is empty") || !strings.Contains(err.Error(), "service account is empty") {
		t.Errorf("an empty config: %v", err)
	}
}

func backupMember(mut ...func(*dpv1alpha1.VolumeBackupMember)) *dpv1alpha1.VolumeBackupMember {
	m := &dpv1alpha1.VolumeBackupMember{
		ObjectMeta: metav1.ObjectMeta{Name: "fed-b1", Namespace: "tidb", Labels: map[string]string{dpv1alpha1.LabelOwnerNamespace: "tidb"}},
		Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: "b1", K8sClusterName: "az1", TCName: "basic", TCNamespace: "tidb",
			Template: fedv1alpha1.VolumeBackupMemberSpec{StorageProvider: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "tidb/b1-az1"}}}},
	}
	for _, f := range mut {
		f(m)
	}
	return m
}

func restoreMember(mut ...func(*dpv1alpha1.VolumeRestoreMember)) *dpv1alpha1.VolumeRestoreMember {
	m := &dpv1alpha1.VolumeRestoreMember{
		ObjectMeta: metav1.ObjectMeta{Name: "fed-r1", Namespace: "tidb", Labels: map[string]string{dpv1alpha1.LabelOwnerNamespace: "tidb"}},
		Spec: dpv1alpha1.VolumeRestoreMemberSpec{VolumeRestore: "r1", K8sClusterName: "az1", TCName: "basic", TCNamespace: "tidb",
			Backup: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "tidb/b1-az1"}}},
	}
	for _, f := range mut {
		f(m)
	}
	return m
}

func hostPath(name, dir string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}}}
}

// violation is what a test expects of one Violation.
type violation struct{ rule, field, value string }

func check(t *testing.T, got []Violation, want []violation) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("violations %v, want %v", got, want)
	}
	for i, w := range want {
		if g := got[i]; g.Rule != w.rule || g.Field != w.field || g.Value != w.value {
			t.Errorf("violation %d: %s %s %q, want %s %s %q", i, g.Rule, g.Field, g.Value, w.rule, w.field, w.value)
		}
	}
}

func TestCheckBackupMember(t *testing.T) {
	withTemplate := func(f func(*fedv1alpha1.VolumeBackupMemberSpec)) func(*dpv1alpha1.VolumeBackupMember) {
		return func(m *dpv1alpha1.VolumeBackupMember) { f(&m.Spec.Template) }
	}
	// owner is a member of control-plane namespace ns, its storage under ns's prefix.
	owner := func(ns string) func(*dpv1alpha1.VolumeBackupMember) {
		return func(m *dpv1alpha1.VolumeBackupMember) {
			m.Labels[dpv1alpha1.LabelOwnerNamespace] = ns
			m.Spec.Template.S3.Prefix = ns + "/b1-az1"
		}
	}
	for _, tt := range []struct {
		name string
		c    Config
		m    *dpv1alpha1.VolumeBackupMember
		want []violation
	}{
		{name: "the manager's plain member", c: Config{SameNamespace: true}, m: backupMember()},
		{name: "no owner label", c: Config{SameNamespace: true},
			m: backupMember(func(m *dpv1alpha1.VolumeBackupMember) { m.Labels = nil }),
			want: []violation{{dpv1alpha1.NamespaceNotAllowedReason, "metadata.labels[dataplane.fedbr.io/owner-namespace]", ""},
				{dpv1alpha1.StorageNotAllowedReason, "spec.template.s3", "s3://bk/tidb/b1-az1"}}},
		{name: "another control-plane namespace", c: Config{SameNamespace: true}, m: backupMember(owner("team-a")),
			want: []violation{{dpv1alpha1.NamespaceNotAllowedReason, "metadata.namespace", "tidb"}}},
		{name: "a mapped control-plane namespace", c: Config{SameNamespace: true, Namespaces: []string{"team-*=tidb,tidb-restored"}}, m: backupMember(owner("team-a"))},
		{name: "same name refused when switched off", c: Config{}, m: backupMember(),
			want: []violation{{dpv1alpha1.NamespaceNotAllowedReason, "metadata.namespace", "tidb"}}},
		{name: "a TidbCluster in an unmapped namespace", c: Config{SameNamespace: true},
			m:    backupMember(func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.TCNamespace = "prod" }),
			want: []violation{{dpv1alpha1.NamespaceNotAllowedReason, "spec.tcNamespace", "prod"}}},
		{name: "the agent's own image named", m: backupMember(withTemplate(func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.ToolImage = agentImage })), c: Config{SameNamespace: true}},
		{name: "foreign image", c: Config{SameNamespace: true}, m: backupMember(withTemplate(func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.ToolImage = "evil.example.com/br:1" })),
			want: []violation{{dpv1alpha1.ImageNotAllowedReason, "spec.template.toolImage", "evil.example.com/br:1"}}},
		{name: "image allowed by pattern", c: Config{SameNamespace: true, Images: []string{"registry.example.com/fedbr:*"}},
			m: backupMember(withTemplate(func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.ToolImage = "registry.example.com/fedbr:v2" }))},
		{name: "a glob does not cross a slash", c: Config{SameNamespace: true, Images: []string{"registry.example.com/*"}},
			m:    backupMember(withTemplate(func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.ToolImage = "registry.example.com/evil/fedbr:v2" })),
			want: []violation{{dpv1alpha1.ImageNotAllowedReason, "spec.template.toolImage", "registry.example.com/evil/fedbr:v2"}}},
		{name: "foreign service account", c: Config{SameNamespace: true}, m: backupMember(withTemplate(func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.ServiceAccount = "admin" })),
			want: []violation{{dpv1alpha1.ServiceAccountNotAllowedReason, "spec.template.serviceAccount", "admin"}}},
		{name: "service account allowed in its namespace", c: Config{SameNamespace: true, ServiceAccounts: []string{"tidb/br-irsa"}},
			m: backupMember(withTemplate(func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.ServiceAccount = "br-irsa" }))},
		{name: "service account allowed in another namespace only", c: Config{SameNamespace: true, ServiceAccounts: []string{"prod/br-irsa"}},
			m:    backupMember(withTemplate(func(t *fedv1alpha1.VolumeBackupMemberSpec) { t.ServiceAccount = "br-irsa" })),
			want: []violation{{dpv1alpha1.ServiceAccountNotAllowedReason, "spec.template.serviceAccount", "br-irsa"}}},
		{name: "hostPath additional volume and local storage", c: Config{SameNamespace: true}, m: backupMember(withTemplate(func(t *fedv1alpha1.VolumeBackupMemberSpec) {
			t.AdditionalVolumes = []corev1.Volume{{Name: "tmp"}, hostPath("root", "/")}
			t.StorageProvider = fedv1alpha1.StorageProvider{Local: &fedv1alpha1.LocalStorageProvider{Volume: hostPath("s", "/etc"), VolumeMount: corev1.VolumeMount{MountPath: "/backup"}}}
		})), want: []violation{
			{dpv1alpha1.HostPathNotAllowedReason, "spec.template.additionalVolumes[1].hostPath.path", "/"},
			{dpv1alpha1.HostPathNotAllowedReason, "spec.template.local.volume.hostPath.path", "/etc"},
		}},
		{name: "hostPath allowed", c: Config{SameNamespace: true, HostPath: true}, m: backupMember(withTemplate(func(t *fedv1alpha1.VolumeBackupMemberSpec) {
			t.AdditionalVolumes = []corev1.Volume{hostPath("data", "/data")}
		}))},
		{name: "mounts over identity tokens, however spelled", c: Config{SameNamespace: true, HostPath: true}, m: backupMember(withTemplate(func(t *fedv1alpha1.VolumeBackupMemberSpec) {
			t.AdditionalVolumeMounts = []corev1.VolumeMount{
				{Name: "a", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"},
				{Name: "b", MountPath: "/var/run//secrets/eks.amazonaws.com/serviceaccount/token"},
				{Name: "c", MountPath: "/run/x/../secrets/pods.eks.amazonaws.com"},
				{Name: "d", MountPath: "/var/run/secrets/app"},
				{Name: "e", MountPath: "/var/run/secrets/kubernetes.io-not"},
			}
			t.StorageProvider = fedv1alpha1.StorageProvider{Local: &fedv1alpha1.LocalStorageProvider{Volume: hostPath("s", "/b"),
				VolumeMount: corev1.VolumeMount{MountPath: "var/run/secrets/kubernetes.io"}}}
		})), want: []violation{
			{dpv1alpha1.IdentityMountNotAllowedReason, "spec.template.additionalVolumeMounts[0].mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"},
			{dpv1alpha1.IdentityMountNotAllowedReason, "spec.template.additionalVolumeMounts[1].mountPath", "/var/run//secrets/eks.amazonaws.com/serviceaccount/token"},
			{dpv1alpha1.IdentityMountNotAllowedReason, "spec.template.additionalVolumeMounts[2].mountPath", "/run/x/../secrets/pods.eks.amazonaws.com"},
			{dpv1alpha1.IdentityMountNotAllowedReason, "spec.template.local.volumeMount.mountPath", "var/run/secrets/kubernetes.io"},
		}},
		{name: "credential variables", c: Config{SameNamespace: true}, m: backupMember(withTemplate(func(t *fedv1alpha1.VolumeBackupMemberSpec) {
			t.Env = []corev1.EnvVar{{Name: "TZ", Value: "UTC"}, {Name: "AWS_ACCESS_KEY_ID", Value: "AKIA"}, {Name: "https_proxy", Value: "http://mitm:3128"},
				{Name: "AWS_ENDPOINT_URL_EC2", Value: "http://evil"}, {Name: "KUBECONFIG", Value: "/tmp/k"}, {Name: "SSL_CERT_FILE", Value: "/tmp/ca"}}
		})), want: []violation{
			{dpv1alpha1.CredentialEnvNotAllowedReason, "spec.template.env[1].name", "AWS_ACCESS_KEY_ID"},
			{dpv1alpha1.CredentialEnvNotAllowedReason, "spec.template.env[2].name", "https_proxy"},
			{dpv1alpha1.CredentialEnvNotAllowedReason, "spec.template.env[3].name", "AWS_ENDPOINT_URL_EC2"},
			{dpv1alpha1.CredentialEnvNotAllowedReason, "spec.template.env[4].name", "KUBECONFIG"},
			{dpv1alpha1.CredentialEnvNotAllowedReason, "spec.template.env[5].name", "SSL_CERT_FILE"},
		}},
		{name: "credential variable allowed by exact name only, never by a pattern", c: Config{SameNamespace: true, Env: []string{"AWS_REGION", "AWS_MAX_*", "*"}},
			m: backupMember(withTemplate(func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.Env = []corev1.EnvVar{{Name: "AWS_REGION", Value: "us-west-2"}, {Name: "AWS_MAX_ATTEMPTS", Value: "5"}, {Name: "AWS_PROFILE", Value: "x"}, {Name: "APP_MODE", Value: "x"}}
			})), want: []violation{
				{dpv1alpha1.CredentialEnvNotAllowedReason, "spec.template.env[1].name", "AWS_MAX_ATTEMPTS"},
				{dpv1alpha1.CredentialEnvNotAllowedReason, "spec.template.env[2].name", "AWS_PROFILE"},
			}},
		// issue 38: the variables that redirect the AWS SDK or what the process loads and trusts,
		// and anything not on the allowlist.
		{name: "HOME, the Go runtime's debug switches, the loader, CA bundles and unlisted variables", c: Config{SameNamespace: true},
			m: backupMember(withTemplate(func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.Env = []corev1.EnvVar{{Name: "HOME", Value: "/h"}, {Name: "GODEBUG", Value: "x509ignoreCN=1"}, {Name: "LD_PRELOAD", Value: "/x.so"},
					{Name: "SSL_CERT_DIR", Value: "/x"}, {Name: "home", Value: "/h"}, {Name: "GOMAXPROCS", Value: "2"}, {Name: "APP_MODE", Value: "x"}}
			})), want: []violation{
				{dpv1alpha1.CredentialEnvNotAllowedReason, "spec.template.env[0].name", "HOME"},
				{dpv1alpha1.CredentialEnvNotAllowedReason, "spec.template.env[1].name", "GODEBUG"},
				{dpv1alpha1.CredentialEnvNotAllowedReason, "spec.template.env[2].name", "LD_PRELOAD"},
				{dpv1alpha1.CredentialEnvNotAllowedReason, "spec.template.env[3].name", "SSL_CERT_DIR"},
				{dpv1alpha1.CredentialEnvNotAllowedReason, "spec.template.env[4].name", "home"},
				{dpv1alpha1.EnvNotAllowedReason, "spec.template.env[6].name", "APP_MODE"},
			}},
		{name: "a variable the operator allowed by pattern", c: Config{SameNamespace: true, Env: []string{"APP_*"}},
			m: backupMember(withTemplate(func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.Env = []corev1.EnvVar{{Name: "APP_MODE", Value: "x"}, {Name: "TZ", Value: "UTC"}}
			}))},
		{name: "volume types beyond scratch, ConfigMap, Secret and claim", c: Config{SameNamespace: true},
			m: backupMember(withTemplate(func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.AdditionalVolumes = []corev1.Volume{
					{Name: "scratch"}, {Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
					{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "x"}}},
					{Name: "pvc", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
					{Name: "aws-config", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}},
					{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
					{Name: "c", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io"}}},
					{Name: "n", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "10.0.0.1", Path: "/"}}},
					{Name: "two", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}, DownwardAPI: &corev1.DownwardAPIVolumeSource{}}},
				}
			})), want: []violation{
				{dpv1alpha1.VolumeTypeNotAllowedReason, "spec.template.additionalVolumes[4].downwardAPI", "aws-config"},
				{dpv1alpha1.VolumeTypeNotAllowedReason, "spec.template.additionalVolumes[5].projected", "p"},
				{dpv1alpha1.VolumeTypeNotAllowedReason, "spec.template.additionalVolumes[6].csi", "c"},
				{dpv1alpha1.VolumeTypeNotAllowedReason, "spec.template.additionalVolumes[7].nfs", "n"},
				{dpv1alpha1.VolumeTypeNotAllowedReason, "spec.template.additionalVolumes[8].downwardAPI+emptyDir", "two"},
			}},
		{name: "a volume type the operator allowed", c: Config{SameNamespace: true, VolumeTypes: []string{"csi"}},
			m: backupMember(withTemplate(func(t *fedv1alpha1.VolumeBackupMemberSpec) {
				t.AdditionalVolumes = []corev1.Volume{{Name: "c", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d"}}}}
			}))},
		{name: "everything at once, in order", c: Config{SameNamespace: true}, m: backupMember(owner("team-a"), withTemplate(func(t *fedv1alpha1.VolumeBackupMemberSpec) {
			t.ToolImage, t.ServiceAccount = "evil:1", "default"
			t.Env = []corev1.EnvVar{{Name: "AWS_SECRET_ACCESS_KEY"}}
		})), want: []violation{
			{dpv1alpha1.NamespaceNotAllowedReason, "metadata.namespace", "tidb"},
			{dpv1alpha1.ImageNotAllowedReason, "spec.template.toolImage", "evil:1"},
			{dpv1alpha1.ServiceAccountNotAllowedReason, "spec.template.serviceAccount", "default"},
			{dpv1alpha1.CredentialEnvNotAllowedReason, "spec.template.env[0].name", "AWS_SECRET_ACCESS_KEY"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			check(t, mustNew(t, tt.c).Check(ForBackup(tt.m)), tt.want)
		})
	}
}

func TestCheckRestoreMember(t *testing.T) {
	warmup := func(mode fedv1alpha1.RestoreWarmupMode, s fedv1alpha1.RestoreWarmupStrategy) func(*dpv1alpha1.VolumeRestoreMember) {
		return func(m *dpv1alpha1.VolumeRestoreMember) {
			m.Spec.Template.Warmup, m.Spec.Template.WarmupStrategy = mode, s
		}
	}
	for _, tt := range []struct {
		name  string
		c     Config
		m     *dpv1alpha1.VolumeRestoreMember
		other []string
		want  []violation
	}{
		{name: "no warm-up", m: restoreMember()},
		{name: "a warm-up image is judged only with a warm-up", m: restoreMember(func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.Template.WarmupImage = "evil:1" })},
		{name: "foreign warm-up image", m: restoreMember(warmup(fedv1alpha1.RestoreWarmupSync, ""), func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.Template.WarmupImage = "evil:1" }),
			want: []violation{{dpv1alpha1.ImageNotAllowedReason, "spec.template.warmupImage", "evil:1"}}},
		{name: "a user's check runs only an allowed image", m: restoreMember(func(m *dpv1alpha1.VolumeRestoreMember) {
			m.Spec.Template.Verify, m.Spec.Template.Check = true, &fedv1alpha1.RestoreCheck{Image: "evil:1"}
		}), want: []violation{{dpv1alpha1.ImageNotAllowedReason, "spec.template.check.image", "evil:1"}}},
		{name: "hybrid on the data volume alone reads files", m: restoreMember(warmup(fedv1alpha1.RestoreWarmupSync, "")), other: []string{}},
		{name: "hybrid with a raft volume reads blocks", m: restoreMember(warmup(fedv1alpha1.RestoreWarmupSync, "")), other: []string{"tikv-raft"},
			want: []violation{{dpv1alpha1.PrivilegedNotAllowedReason, "spec.template.warmupStrategy", "hybrid"}}},
		{name: "fsr with a raft volume reads blocks", m: restoreMember(warmup(fedv1alpha1.RestoreWarmupAsync, fedv1alpha1.RestoreWarmupStrategyFsr)), other: []string{"tikv-raft"},
			want: []violation{{dpv1alpha1.PrivilegedNotAllowedReason, "spec.template.warmupStrategy", "fsr"}}},
		{name: "check-wal-only with a raft volume reads blocks", m: restoreMember(warmup(fedv1alpha1.RestoreWarmupSync, fedv1alpha1.RestoreWarmupStrategyCheckWALOnly)), other: []string{"tikv-raft"},
			want: []violation{{dpv1alpha1.PrivilegedNotAllowedReason, "spec.template.warmupStrategy", "check-wal-only"}}},
		{name: "fs with a raft volume reads files only: no privilege", m: restoreMember(warmup(fedv1alpha1.RestoreWarmupSync, fedv1alpha1.RestoreWarmupStrategyFs)), other: []string{"tikv-raft"}},
		{name: "check-wal-only on the data volume alone reads files", m: restoreMember(warmup(fedv1alpha1.RestoreWarmupSync, fedv1alpha1.RestoreWarmupStrategyCheckWALOnly)), other: []string{}},
		{name: "fio reads blocks, TidbCluster unknown", m: restoreMember(warmup(fedv1alpha1.RestoreWarmupSync, fedv1alpha1.RestoreWarmupStrategyFio)),
			want: []violation{{dpv1alpha1.PrivilegedNotAllowedReason, "spec.template.warmupStrategy", "fio"}}},
		{name: "privileged warm-up allowed", c: Config{PrivilegedWarmup: true}, m: restoreMember(warmup(fedv1alpha1.RestoreWarmupSync, fedv1alpha1.RestoreWarmupStrategyFio))},
		{name: "hostPath backup storage", m: restoreMember(func(m *dpv1alpha1.VolumeRestoreMember) {
			m.Spec.Backup = fedv1alpha1.StorageProvider{Local: &fedv1alpha1.LocalStorageProvider{Volume: hostPath("b", "/var/lib/kubelet"), VolumeMount: corev1.VolumeMount{MountPath: "/backup"}}}
		}), want: []violation{{dpv1alpha1.HostPathNotAllowedReason, "spec.backup.local.volume.hostPath.path", "/var/lib/kubelet"}}},
		{name: "restore into an unmapped namespace", m: restoreMember(func(m *dpv1alpha1.VolumeRestoreMember) {
			m.Namespace, m.Spec.TCNamespace = "kube-system", "kube-system"
		}),
			want: []violation{{dpv1alpha1.NamespaceNotAllowedReason, "metadata.namespace", "kube-system"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.SameNamespace = true
			check(t, mustNew(t, tt.c).Check(ForRestore(tt.m, tt.other)), tt.want)
		})
	}
}

// TestCheckStorage: a member's S3 storage, as its steps will use it, lies under a storage root
// of its control-plane namespace, segment by segment; a local storage is the volume rules'.
func TestCheckStorage(t *testing.T) {
	s3 := func(bucket, prefix string) fedv1alpha1.StorageProvider {
		return fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: bucket, Prefix: prefix}}
	}
	backup := func(sp fedv1alpha1.StorageProvider) Member {
		return ForBackup(backupMember(func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.Template.StorageProvider = sp }))
	}
	restore := func(sp fedv1alpha1.StorageProvider) Member {
		return ForRestore(restoreMember(func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.Backup = sp }), nil)
	}
	refused := func(field, value string) []violation {
		return []violation{{dpv1alpha1.StorageNotAllowedReason, field, value}}
	}
	tenants := []string{"s3://bk/tenants/{namespace}/fedbr"}
	for _, tt := range []struct {
		name    string
		storage []string
		m       Member
		want    []violation
	}{
		{name: "a backup under its namespace's prefix", m: backup(s3("bk", "tidb/nightly-az1"))},
		{name: "a restore of the namespace's prefix itself", m: restore(s3("any-bucket", "tidb"))},
		{name: "a look-alike sibling of the namespace's prefix", m: restore(s3("bk", "tidb-b/nightly-az1")),
			want: refused("spec.backup.s3", "s3://bk/tidb-b/nightly-az1")},
		{name: "a backup whose VolumeBackup prefix is the namespace's name alone (its member's is tidb-az1)", m: backup(s3("bk", "tidb-az1")),
			want: refused("spec.template.s3", "s3://bk/tidb-az1")},
		{name: "a restore of another tenant's prefix", m: restore(s3("bk", "team-b/nightly-az1")),
			want: refused("spec.backup.s3", "s3://bk/team-b/nightly-az1")},
		{name: "a restore of the bucket's root", m: restore(s3("bk", "")), want: refused("spec.backup.s3", "s3://bk")},
		{name: "a way out by ..", m: restore(s3("bk", "tidb/../team-b/nightly-az1")), want: refused("spec.backup.s3", "s3://bk/tidb/../team-b/nightly-az1")},
		{name: "an empty segment", m: restore(s3("bk", "tidb//nightly-az1")), want: refused("spec.backup.s3", "s3://bk/tidb//nightly-az1")},
		{name: "a trailing slash", m: restore(s3("bk", "tidb/nightly-az1/")), want: refused("spec.backup.s3", "s3://bk/tidb/nightly-az1/")},
		{name: "a . segment", m: backup(s3("bk", "tidb/./nightly-az1")), want: refused("spec.template.s3", "s3://bk/tidb/./nightly-az1")},
		{name: "a leading slash", m: backup(s3("bk", "/tidb/nightly-az1")), want: refused("spec.template.s3", "s3://bk//tidb/nightly-az1")},
		{name: "a path under the namespace's prefix", m: restore(fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Path: "s3://bk/tidb", Prefix: "nightly-az1"}})},
		{name: "a path of another tenant, its prefix named like the namespace",
			m:    restore(fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Path: "s3://bk/team-b", Prefix: "tidb"}}),
			want: refused("spec.backup.s3", "s3://bk/team-b/tidb")},
		{name: "a path that climbs out", m: backup(fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Path: "s3://bk/tidb/../team-b", Prefix: "x-az1"}}),
			want: refused("spec.template.s3", "s3://bk/tidb/../team-b/x-az1")},
		{name: "a bucket wins over a path, as for the steps",
			m: restore(fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Bucket: "bk", Prefix: "tidb/x", Path: "s3://other/team-b"}})},
		{name: "a bucket with a slash, which the steps would split into another bucket and prefix", storage: []string{"s3://backups[^a]*/{namespace}"},
			m: restore(s3("backups/team-b", "tidb/x")), want: refused("spec.backup.s3", "s3://backups/team-b/tidb/x")},
		{name: "a bucket with a query", m: restore(fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Path: "s3://bk?region=us-east-1/tidb/x"}}),
			want: refused("spec.backup.s3", "s3://bk?region=us-east-1/tidb/x")},
		{name: "a query in the prefix", m: restore(s3("bk", "tidb/x?region=us-east-1")), want: refused("spec.backup.s3", "s3://bk/tidb/x?region=us-east-1")},
		{name: "a bucket the glob matches", storage: []string{"s3://backups-*/{namespace}"}, m: restore(s3("backups-prod", "tidb/x"))},
		{name: "a bucket the glob does not match", storage: []string{"s3://backups-*/{namespace}"}, m: restore(s3("other", "tidb/x")),
			want: refused("spec.backup.s3", "s3://other/tidb/x")},
		{name: "a custom root with {namespace} deep in it", storage: tenants, m: backup(s3("bk", "tenants/tidb/fedbr/nightly-az1"))},
		{name: "a custom root replaces the default", storage: tenants, m: backup(s3("bk", "tidb/nightly-az1")),
			want: refused("spec.template.s3", "s3://bk/tidb/nightly-az1")},
		{name: "a custom root of another tenant", storage: tenants, m: restore(s3("bk", "tenants/team-b/fedbr/nightly-az1")),
			want: refused("spec.backup.s3", "s3://bk/tenants/team-b/fedbr/nightly-az1")},
		{name: "a root short of a segment", storage: tenants, m: restore(s3("bk", "tenants/tidb")),
			want: refused("spec.backup.s3", "s3://bk/tenants/tidb")},
		{name: "a whole bucket for everyone", storage: []string{"s3://shared", "s3://bk/tenants/{namespace}/fedbr"}, m: restore(s3("shared", "team-b/x"))},
		{name: "an S3 storage without an owner", m: func() Member { m := restore(s3("bk", "tidb/x")); m.OwnerNamespace = ""; return m }(),
			want: []violation{{dpv1alpha1.NamespaceNotAllowedReason, "metadata.labels[dataplane.fedbr.io/owner-namespace]", ""},
				{dpv1alpha1.StorageNotAllowedReason, "spec.backup.s3", "s3://bk/tidb/x"}}},
		{name: "a local storage is the volume rules'", m: restore(fedv1alpha1.StorageProvider{Local: &fedv1alpha1.LocalStorageProvider{Prefix: "../team-b",
			Volume:      corev1.Volume{Name: "b", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "backups"}}},
			VolumeMount: corev1.VolumeMount{Name: "b", MountPath: "/backup"}}})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			check(t, mustNew(t, Config{SameNamespace: true, Storage: tt.storage}).Check(tt.m), tt.want)
		})
	}
}

func TestStorageMessage(t *testing.T) {
	vs := Default(agentImage, "fedbr-br").Check(ForRestore(restoreMember(func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.Backup.S3.Prefix = "team-b/nightly-az1" }), nil))
	if Reason(vs) != dpv1alpha1.StorageNotAllowedReason {
		t.Fatalf("reason %q (%v)", Reason(vs), vs)
	}
	for _, want := range []string{`spec.backup.s3 "s3://bk/team-b/nightly-az1"`, `control-plane namespace "tidb"`, "s3://*/tidb", "--allowed-storage"} {
		if msg := Message(vs); !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	vs = Default(agentImage, "fedbr-br").Check(ForRestore(restoreMember(func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.Backup.S3.Prefix = "tidb/../team-b" }), nil))
	if msg := Message(vs); !strings.Contains(msg, `an empty, "." or ".." segment`) {
		t.Errorf("message %q does not name the bad segment", msg)
	}
}

func TestCheckPod(t *testing.T) {
	pod := func(mut ...func(*corev1.PodSpec)) *corev1.PodSpec {
		p := &corev1.PodSpec{ServiceAccountName: "fedbr-br", Containers: []corev1.Container{{Name: "br", Image: agentImage}}}
		for _, f := range mut {
			f(p)
		}
		return p
	}
	privileged := func(p *corev1.PodSpec) {
		p.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}
	for _, tt := range []struct {
		name string
		c    Config
		step string
		pod  *corev1.PodSpec
		want []violation
	}{
		{name: "the agent's own pod", step: dpv1alpha1.StepSnapshot, pod: pod()},
		{name: "host namespaces", step: dpv1alpha1.StepSnapshot, pod: pod(func(p *corev1.PodSpec) { p.HostNetwork, p.HostPID, p.HostIPC = true, true, true }),
			want: []violation{{dpv1alpha1.HostNamespaceNotAllowedReason, "spec.hostNetwork", "true"}, {dpv1alpha1.HostNamespaceNotAllowedReason, "spec.hostPID", "true"},
				{dpv1alpha1.HostNamespaceNotAllowedReason, "spec.hostIPC", "true"}}},
		{name: "no service account runs as default", step: dpv1alpha1.StepSnapshot, pod: pod(func(p *corev1.PodSpec) { p.ServiceAccountName = "" }),
			want: []violation{{dpv1alpha1.ServiceAccountNotAllowedReason, "spec.serviceAccountName", "default"}}},
		{name: "allowed service account pattern", c: Config{ServiceAccounts: []string{"tidb/br-*"}}, step: dpv1alpha1.StepSnapshot, pod: pod(func(p *corev1.PodSpec) { p.ServiceAccountName = "br-irsa" })},
		{name: "a user's check: the default service account without a token has no identity to judge", step: dpv1alpha1.StepCheck,
			pod: pod(func(p *corev1.PodSpec) {
				p.ServiceAccountName, p.AutomountServiceAccountToken = "default", ptr.To(false)
			})},
		{name: "the default service account with its token", step: dpv1alpha1.StepCheck,
			pod:  pod(func(p *corev1.PodSpec) { p.ServiceAccountName = "default" }),
			want: []violation{{dpv1alpha1.ServiceAccountNotAllowedReason, "spec.serviceAccountName", "default"}}},
		{name: "the default service account without its token but a projected one", step: dpv1alpha1.StepCheck,
			pod: pod(func(p *corev1.PodSpec) {
				p.ServiceAccountName, p.AutomountServiceAccountToken = "default", ptr.To(false)
				p.Volumes = []corev1.Volume{{Name: "t", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}}
			}),
			want: []violation{{dpv1alpha1.ServiceAccountNotAllowedReason, "spec.serviceAccountName", "default"}}},
		{name: "another service account without a token is still judged", step: dpv1alpha1.StepCheck,
			pod: pod(func(p *corev1.PodSpec) {
				p.ServiceAccountName, p.AutomountServiceAccountToken = "br-irsa", ptr.To(false)
			}),
			want: []violation{{dpv1alpha1.ServiceAccountNotAllowedReason, "spec.serviceAccountName", "br-irsa"}}},
		{name: "hostPath", step: dpv1alpha1.StepSnapshot, pod: pod(func(p *corev1.PodSpec) { p.Volumes = []corev1.Volume{hostPath("s", "/var/run/docker.sock")} }),
			want: []violation{{dpv1alpha1.HostPathNotAllowedReason, "spec.volumes[0].hostPath.path", "/var/run/docker.sock"}}},
		{name: "foreign image in an init container", step: dpv1alpha1.StepSnapshot,
			pod:  pod(func(p *corev1.PodSpec) { p.InitContainers = []corev1.Container{{Name: "x", Image: "evil@sha256:00"}} }),
			want: []violation{{dpv1alpha1.ImageNotAllowedReason, "spec.initContainers[0].image", "evil@sha256:00"}}},
		{name: "privileged step", step: dpv1alpha1.StepSnapshot, c: Config{PrivilegedWarmup: true}, pod: pod(privileged),
			want: []violation{{dpv1alpha1.PrivilegedNotAllowedReason, "spec.containers[0].securityContext.privileged", "true"}}},
		{name: "privileged warm-up without the flag", step: dpv1alpha1.StepWarmup, pod: pod(privileged),
			want: []violation{{dpv1alpha1.PrivilegedNotAllowedReason, "spec.containers[0].securityContext.privileged", "true"}}},
		{name: "privileged warm-up with the flag", step: dpv1alpha1.StepWarmup, c: Config{PrivilegedWarmup: true}, pod: pod(privileged)},
		{name: "added capabilities", step: dpv1alpha1.StepRestoreData, pod: pod(func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}, Drop: []corev1.Capability{"ALL"}}}
		}), want: []violation{{dpv1alpha1.CapabilitiesNotAllowedReason, "spec.containers[0].securityContext.capabilities.add[0]", "SYS_ADMIN"}}},
		{name: "dropped capabilities and a restricted context are fine", step: dpv1alpha1.StepRestoreData, pod: pod(func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true)}
		})},
		{name: "mount over the service-account token", step: dpv1alpha1.StepSize, pod: pod(func(p *corev1.PodSpec) {
			p.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "t", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount/token"}}
		}), want: []violation{{dpv1alpha1.IdentityMountNotAllowedReason, "spec.containers[0].volumeMounts[0].mountPath", "/var/run/secrets/kubernetes.io/serviceaccount/token"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			check(t, mustNew(t, tt.c).CheckPod(tt.step, "tidb", tt.pod), tt.want)
		})
	}
	var none *Policy
	if vs := none.CheckPod(dpv1alpha1.StepSnapshot, "tidb", pod(privileged)); vs != nil {
		t.Errorf("a nil policy found %v", vs)
	}
}

func TestMessageNamesEveryFieldAndValue(t *testing.T) {
	p := Default(agentImage, "fedbr-br")
	vs := p.Check(ForBackup(backupMember(func(m *dpv1alpha1.VolumeBackupMember) {
		m.Spec.Template.ToolImage = "evil.example.com/br@sha256:abc"
		m.Spec.Template.Env = []corev1.EnvVar{{Name: "AWS_ROLE_ARN", Value: "arn:aws:iam::1:role/x"}}
	})))
	if Reason(vs) != dpv1alpha1.ImageNotAllowedReason {
		t.Errorf("reason %q", Reason(vs))
	}
	msg := Message(vs)
	for _, want := range []string{`spec.template.toolImage "evil.example.com/br@sha256:abc"`, `the agent's own "registry.example.com/fedbr:v1"`,
		`spec.template.env[0].name "AWS_ROLE_ARN"`, "(ImageNotAllowed)", "(CredentialEnvNotAllowed)", "--allowed-env"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if Reason(nil) != "" {
		t.Error("no violation has no reason")
	}
}

func TestString(t *testing.T) {
	s := mustNew(t, Config{SameNamespace: true, Namespaces: []string{"ops=tidb,tidb-*"}, Images: []string{"r/*"}, HostPath: true}).String()
	for _, want := range []string{"namespaces: same name, [ops=tidb,tidb-*]", "images: registry.example.com/fedbr:v1, r/*", "service accounts: fedbr-br",
		"hostPath allowed", "privileged warm-up refused", "env: TZ, GOMAXPROCS, GOMEMLIMIT, GOGC", "volume types: emptyDir, configMap, secret, persistentVolumeClaim",
		"storage: s3://*/{namespace}"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
	if s := mustNew(t, Config{Storage: []string{"s3://a/{namespace}", "s3://b"}}).String(); !strings.Contains(s, "storage: s3://a/{namespace}, s3://b;") {
		t.Errorf("%q lacks the storage roots", s)
	}
	if s := Default(agentImage, "fedbr-br").String(); !strings.Contains(s, "storage: s3://*/{namespace}") {
		t.Errorf("the default policy %q lacks the default storage root", s)
	}
}
