package agent

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
)

func TestDryRun(t *testing.T) {
	cmd := NewCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--k8s-cluster-name", "az1", "--image", "fedbr:dev", "--region", "us-west-2", "--aws-endpoint", "http://127.0.0.1:4566", "--namespace", "tidb,tidb-restore", "--dry-run"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`data plane "az1"`, "in namespaces tidb, tidb-restore:", "Jobs in fedbr:dev", `region "us-west-2", endpoint "http://127.0.0.1:4566"`, "orphan sweep every 10m0s, grace 1h0m0s",
		"policy: namespaces: same name; images: fedbr:dev; service accounts: fedbr-br; hostPath refused; privileged warm-up refused; " +
			"env: TZ, GOMAXPROCS, GOMEMLIMIT, GOGC; volume types: emptyDir, configMap, secret, persistentVolumeClaim; storage: s3://*/{namespace}; upstream backups refused; " +
			"pod annotations: iam.amazonaws.com/role, eks.amazonaws.com/role-arn; pod labels: none"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q lacks %q", out.String(), want)
		}
	}
}

func TestDryRunSweeperOff(t *testing.T) {
	cmd := NewCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--k8s-cluster-name", "az1", "--image", "fedbr:dev", "--region", "us-west-2", "--orphan-sweep-interval", "0", "--dry-run"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "orphan sweeper off") {
		t.Errorf("output %q does not say the sweeper is off", out.String())
	}
}

func TestDryRunPolicyFlags(t *testing.T) {
	cmd := NewCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--k8s-cluster-name", "az1", "--image", "fedbr:dev", "--region", "us-west-2", "--dry-run", "--allow-same-namespace=false",
		"--allow-namespaces", "backup-admins=tidb,tidb-*", "--allow-namespaces", "ops=*", "--allowed-images", "registry.example.com/fedbr:*,registry.example.com/fedbr@sha256:*",
		"--allow-host-path", "--allowed-service-accounts", "tidb/br-irsa", "--allow-privileged-warmup", "--allowed-env", "AWS_REGION",
		"--allowed-volume-types", "csi", "--allowed-storage", "s3://backups-*/tenants/{namespace},s3://shared", "--allowed-storage", "s3://scratch/{namespace}/tmp",
		"--allow-upstream-backups", "--pod-annotations", "iam.amazonaws.com/role,vault.hashicorp.com/*",
		"--pod-labels", "team,app.kubernetes.io/*"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	want := "policy: namespaces: [backup-admins=tidb,tidb-*], [ops=*]; images: fedbr:dev, registry.example.com/fedbr:*, registry.example.com/fedbr@sha256:*; " +
		"service accounts: fedbr-br, tidb/br-irsa; hostPath allowed; privileged warm-up allowed; env: TZ, GOMAXPROCS, GOMEMLIMIT, GOGC, AWS_REGION; " +
		"volume types: emptyDir, configMap, secret, persistentVolumeClaim, csi; storage: s3://backups-*/tenants/{namespace}, s3://shared, s3://scratch/{namespace}/tmp; " +
		"upstream backups allowed; pod annotations: iam.amazonaws.com/role, vault.hashicorp.com/*; " +
		"pod labels: team, app.kubernetes.io/*"
	if !strings.Contains(out.String(), want) {
		t.Errorf("output %q lacks %q", out.String(), want)
	}
}

func TestRejectsBadFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--image", "x", "--dry-run"}, "--k8s-cluster-name is required"},
		{[]string{"--k8s-cluster-name", "az1", "--dry-run"}, "--image is required"},
		{[]string{"--k8s-cluster-name", "az1", "--image", "x", "--aws-endpoint", "localhost:1", "--dry-run"}, "want an http(s) URL"},
		{[]string{"--k8s-cluster-name", "az1", "--image", "x", "--job-ttl", "1s", "--dry-run"}, "--job-ttl"},
		{[]string{"--k8s-cluster-name", "az1", "--image", "x", "--job-ttl", "600000h", "--dry-run"}, "--job-ttl 600000h0m0s: at most 596523h14m7s"},
		{[]string{"--k8s-cluster-name", "az1", "--image", "x", "--orphan-sweep-interval", "-1m", "--dry-run"}, "--orphan-sweep-interval must not be negative"},
		{[]string{"--k8s-cluster-name", "az1", "--image", "x", "--orphan-grace", "-1s", "--dry-run"}, "--orphan-grace must not be negative"},
		{[]string{"--k8s-cluster-name", "az1", "--image", "x", "--step-exit-delay", "-1s", "--dry-run"}, "--step-exit-delay -1s: want 0 to 1m"},
		{[]string{"--k8s-cluster-name", "az1", "--image", "x", "--step-exit-delay", "2m", "--dry-run"}, "--step-exit-delay 2m0s: want 0 to 1m"},
		{[]string{"--k8s-cluster-name", "az1", "--image", "x", "--allowed-images", "registry.example.com/[fedbr", "--dry-run"},
			`policy: --allowed-images "registry.example.com/[fedbr": not a glob pattern`},
		{[]string{"--k8s-cluster-name", "az1", "--image", "x", "--allow-namespaces", "team-a", "--dry-run"},
			`--allow-namespaces "team-a": want CONTROL_NAMESPACE=DATA_NAMESPACE[,DATA_NAMESPACE…]`},
		{[]string{"--k8s-cluster-name", "az1", "--image", "x", "--allowed-service-accounts", "a/b/c", "--dry-run"}, "want NAME or NAMESPACE/NAME"},
		{[]string{"--k8s-cluster-name", "az1", "--image", "x", "--namespace", "tidb,tidb-*", "--dry-run"}, `--namespace "tidb-*": not a namespace name`},
		{[]string{"--k8s-cluster-name", "az1", "--image", "x", "--allowed-storage", "s3://bk/tenants/../{namespace}", "--dry-run"},
			`policy: --allowed-storage "s3://bk/tenants/../{namespace}": the prefix has an empty, "." or ".." segment`},
	} {
		cmd := NewCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(tt.args)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want %q", tt.args, err, tt.want)
		}
	}
}

// TestRegion: the steps need an AWS region for their first call, and a Job's pod shows none of
// the agent's environment. The agent takes --region, else AWS_REGION, else AWS_DEFAULT_REGION
// of its own environment (what EKS injects with IRSA or Pod Identity), passes it to every step
// as --region, and refuses to start without any.
func TestRegion(t *testing.T) {
	for _, tt := range []struct {
		name                   string
		flag, env, defaultEnv  string
		region, dryRun, errMsg string
	}{
		{name: "the flag wins", flag: "us-west-2", env: "eu-west-1", region: "us-west-2", dryRun: `region "us-west-2",`},
		{name: "AWS_REGION", env: "eu-west-1", defaultEnv: "ap-south-1", region: "eu-west-1", dryRun: `region "eu-west-1" (from AWS_REGION),`},
		{name: "AWS_DEFAULT_REGION", defaultEnv: "ap-south-1", region: "ap-south-1", dryRun: `region "ap-south-1" (from AWS_DEFAULT_REGION),`},
		{name: "none", errMsg: "no AWS region: --region is not set (the agent chart's aws.region) and the agent's environment has neither AWS_REGION nor AWS_DEFAULT_REGION"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("AWS_REGION", tt.env)
			t.Setenv("AWS_DEFAULT_REGION", tt.defaultEnv)
			args := []string{"--k8s-cluster-name", "az1", "--image", "fedbr:dev", "--dry-run"}
			if tt.flag != "" {
				args = append(args, "--region", tt.flag)
			}
			cmd := NewCmd()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&bytes.Buffer{})
			cmd.SetArgs(args)
			err := cmd.Execute()
			if tt.errMsg != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errMsg) {
					t.Fatalf("error %v, want %q", err, tt.errMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tt.dryRun) {
				t.Errorf("output %q lacks %q", out.String(), tt.dryRun)
			}
			o := &options{clusterName: "az1", env: job.Env{Image: "fedbr:dev", Region: tt.flag}, jobTTL: job.DefaultTTL, maxConcurrent: 1}
			if err := o.validate(); err != nil {
				t.Fatal(err)
			}
			if got := o.env.CloudArgs(); !slices.Equal(got, []string{"--region", tt.region}) {
				t.Errorf("the steps get %v, want --region %s", got, tt.region)
			}
		})
	}
}

// TestCacheDropsManagedFields: the agent's cache keeps its objects without their managedFields
// (each step's server-side apply adds an entry to its member's) and keeps the rest.
func TestCacheDropsManagedFields(t *testing.T) {
	copts, err := CacheOptions([]string{"tidb"})
	if err != nil {
		t.Fatal(err)
	}
	if copts.DefaultTransform == nil {
		t.Fatal("no transform: the cache keeps every managedFields entry")
	}
	m := &dpv1alpha1.VolumeRestoreMember{ObjectMeta: metav1.ObjectMeta{Name: "fed-r1", Namespace: "tidb",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "fedbr-br-warmup-0", Operation: metav1.ManagedFieldsOperationApply}}},
		Status: dpv1alpha1.VolumeRestoreMemberStatus{Phase: "Running"}}
	got, err := copts.DefaultTransform(m)
	if err != nil {
		t.Fatal(err)
	}
	if gm := got.(*dpv1alpha1.VolumeRestoreMember); gm.ManagedFields != nil || gm.Status.Phase != "Running" || gm.Name != "fed-r1" {
		t.Errorf("cached member %+v", gm)
	}
	if _, ok := copts.DefaultNamespaces["tidb"]; !ok || len(copts.DefaultNamespaces) != 1 {
		t.Errorf("namespaces %v, want tidb only", copts.DefaultNamespaces)
	}
}
