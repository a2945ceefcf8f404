package admission

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fedbr/fedbr/internal/testenv"
)

// env is one API server shared by every test of this package: starting one takes seconds.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, func(e *testenv.Env) { env = e }))
}

// sample loads a file of config/samples as an unstructured object.
func sample(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.RepoRoot, "config", "samples", name))
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return obj
}

// set writes value at a dotted path such as "spec.clusters[1].tcName"; a nil value deletes it.
func set(t *testing.T, obj map[string]any, path string, value any) {
	t.Helper()
	parts := strings.Split(path, ".")
	var cur any = obj
	for i, p := range parts {
		name, idx := p, -1
		if open := strings.IndexByte(p, '['); open >= 0 {
			name = p[:open]
			n, err := strconv.Atoi(strings.TrimSuffix(p[open+1:], "]"))
			if err != nil {
				t.Fatalf("bad path %q", path)
			}
			idx = n
		}
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("path %q: %q is not an object", path, name)
		}
		last := i == len(parts)-1
		if idx < 0 {
			if last {
				if value == nil {
					delete(m, name)
				} else {
					m[name] = value
				}
				return
			}
			if _, ok := m[name]; !ok {
				m[name] = map[string]any{}
			}
			cur = m[name]
			continue
		}
		list, ok := m[name].([]any)
		if !ok || idx >= len(list) {
			t.Fatalf("path %q: no element %d in %q", path, idx, name)
		}
		if last {
			list[idx] = value
			return
		}
		cur = list[idx]
	}
}

type mutation struct {
	path  string
	value any
}

func TestSamplesAreAccepted(t *testing.T) {
	ctx := context.Background()
	files, err := filepath.Glob(filepath.Join(env.RepoRoot, "config", "samples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			obj := sample(t, filepath.Base(f))
			obj.SetNamespace("samples-ssa")
			ensureNamespace(t, "samples-ssa")
			if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("fedbr-test"), client.ForceOwnership); err != nil {
				t.Fatalf("server-side apply of %s refused: %v", filepath.Base(f), err)
			}
		})
	}
}

// TestKubectlApplySamples applies the samples the way a user does, with kubectl.
func TestKubectlApplySamples(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := env.Kubectl(ctx, "apply", "-f", filepath.Join(env.RepoRoot, "config", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"volumebackup.federation.pingcap.com/nightly-2026-11-29 created",
		"volumebackup.federation.pingcap.com/upstream-style created",
		"volumerestore.federation.pingcap.com/restore-nightly-2026-11-29 created",
		"volumebackupschedule.federation.pingcap.com/every-6h created",
		"tidbcluster.pingcap.com/basic created",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply output lacks %q:\n%s", want, out)
		}
	}
	// Short names and printer columns work as documented.
	out, err = env.Kubectl(ctx, "get", "vbk,vrt,vbks", "-n", "default")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"BACKUPSIZE",
		"COMMITTS", //nolint:misspell // the CommitTS printer column, upstream's name
		"SCHEDULE", "MAXRESERVEDTIME", "every-6h",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get lacks %q:\n%s", want, out)
		}
	}
	// Unknown TidbCluster fields are preserved, so a real manifest round-trips.
	out, err = env.Kubectl(ctx, "get", "tc", "basic", "-n", "default", "-o", "jsonpath={.spec.tikv.config}{.spec.pd.config}")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "location-labels") {
		t.Errorf("TidbCluster lost unknown fields: %q", out)
	}
	// skipGC stays a top-level field.
	out, err = env.Kubectl(ctx, "get", "vbk", "upstream-style", "-n", "default", "-o", "jsonpath={.skipGC}")
	if err != nil || out != "true" {
		t.Errorf("skipGC = %q, %v; want true", out, err)
	}
}

func TestBadObjectsAreRefused(t *testing.T) {
	tests := []struct {
		name    string
		sample  string
		mutate  []mutation
		wantMsg string
	}{
		// VolumeBackup
		{"backup: empty cluster list", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.clusters", []any{}}}, "clusters must name at least one data-plane cluster"},
		{"backup: no cluster list", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.clusters", nil}}, "spec.clusters: Required value"},
		{"backup: duplicate k8sClusterName", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.clusters[1].k8sClusterName", "eks-use1-az1"}}, "k8sClusterName must be unique"},
		{"backup: missing tcName", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.clusters[0].tcName", nil}}, "spec.clusters[0].tcName: Required value"},
		{"backup: missing tcNamespace", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.clusters[2].tcNamespace", nil}}, "spec.clusters[2].tcNamespace: Required value"},
		{"backup: empty tcName", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.clusters[0].tcName", ""}}, "spec.clusters[0].tcName: Invalid value: \"\": spec.clusters[0].tcName in body should be at least 1 chars long"},
		{"backup: tcNamespace not a DNS label", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.clusters[0].tcNamespace", "Tidb_NS"}}, "spec.clusters[0].tcNamespace in body should match"},
		{"backup: missing storage", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.s3", nil}}, "exactly one storage provider (s3, gcs, azblob or local) must be set"},
		{"backup: two storages", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.gcs", map[string]any{"projectId": "p", "bucket": "b"}}}, "exactly one storage provider"},
		{"backup: s3 without provider", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.s3.provider", nil}}, "spec.template.s3.provider: Required value"},
		// S3 fields fedbr does not honour are refused, never accepted and ignored (#21).
		{"backup: s3.endpoint", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.s3.endpoint", "http://minio.internal:9000"}}, "s3.endpoint is not honoured"},
		{"backup: s3.storageClass", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.s3.storageClass", "GLACIER"}}, "s3.storageClass is not honoured"},
		{"backup: s3.acl", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.s3.acl", "public-read"}}, "s3.acl is not honoured"},
		{"backup: s3.sse", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.s3.sse", "aws:kms"}}, "s3.sse is not honoured"},
		{"backup: s3.options", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.s3.options", []any{"--s3.endpoint=http://x"}}}, "s3.options is not honoured"},
		{"backup: s3 provider other than aws", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.s3.provider", "minio"}}, "s3.provider: only aws is supported"},
		{"backup: s3.region not a region", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.s3.region", "evil.example.com"}}, "spec.template.s3.region in body should match"},
		{"backup: gcs", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.s3", nil}, {"spec.template.gcs", map[string]any{"projectId": "p", "bucket": "b"}}}, "gcs is not supported"},
		{"backup: azblob", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.s3", nil}, {"spec.template.azblob", map[string]any{"container": "c"}}}, "azblob is not supported"},
		{"schedule: s3.sse", "federation_v1alpha1_volumebackupschedule.yaml",
			[]mutation{{"spec.backupTemplate.template.s3.sse", "AES256"}}, "s3.sse is not honoured"},
		{"restore: s3.endpoint", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.clusters[0].backup.s3.endpoint", "https://s3.example.com"}}, "s3.endpoint is not honoured"},
		{"restore member: gcs", "dataplane_v1alpha1_volumerestoremember.yaml",
			[]mutation{{"spec.backup.s3", nil}, {"spec.backup.gcs", map[string]any{"projectId": "p", "bucket": "b"}}}, "gcs is not supported"},
		{"backup: snapshotsDeleteRatio too high", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.snapshotsDeleteRatio", 5}}, "snapshotsDeleteRatio must be between 0.1 and 2.0"},
		{"backup: snapshotsDeleteRatio zero", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.snapshotsDeleteRatio", 0}}, "snapshotsDeleteRatio must be between 0.1 and 2.0"},
		{"backup: zero init job deadline", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.volumeBackupInitJobMaxActiveSeconds", 0}}, "volumeBackupInitJobMaxActiveSeconds must be at least 1 second"},
		{"backup: negative init job deadline", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.volumeBackupInitJobMaxActiveSeconds", -60}}, "volumeBackupInitJobMaxActiveSeconds must be at least 1 second"},
		{"backup: unknown calcSizeLevel", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.calcSizeLevel", "sometimes"}}, "spec.template.calcSizeLevel: Unsupported value: \"sometimes\""},
		{"backup: unknown cleanPolicy", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.cleanPolicy", "Never"}}, "spec.template.cleanPolicy: Unsupported value: \"Never\""},
		{"backup: zero stepTimeout", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.stepTimeout", "0s"}}, "stepTimeout must be a positive duration"},
		{"backup: unparsable stepTimeout", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.stepTimeout", "forever"}}, "spec.template.stepTimeout in body should match"},
		{"backup: zero stallTimeout", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.stallTimeout", "0s"}}, "stallTimeout must be a positive duration"},
		{"backup: unparsable stallTimeout", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.stallTimeout", "forever"}}, "spec.template.stallTimeout in body should match"},
		{"restore: a user's check without verify", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.template.check", map[string]any{"image": "example.com/check:1"}}}, "check runs after the built-in checks: set verify too"},
		{"restore: a user's check without an image", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.template.verify", true}, {"spec.template.check", map[string]any{"command": []any{"/check"}}}}, "spec.template.check.image: Required value"},
		{"restore: a user's check with a zero timeout", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.template.verify", true}, {"spec.template.check", map[string]any{"image": "example.com/check:1", "timeout": "0s"}}}, "check.timeout must be a positive duration"},
		{"restore: zero stallTimeout", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.template.stallTimeout", "0h"}}, "stallTimeout must be a positive duration"},
		{"restore: unparsable stallTimeout", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.template.stallTimeout", "2 hours"}}, "spec.template.stallTimeout in body should match"},
		{"backup: zero pauseWaitTimeout", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.pauseWaitTimeout", "0m"}}, "pauseWaitTimeout must be a positive duration"},
		{"backup: unparsable pauseWaitTimeout", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.pauseWaitTimeout", "1d"}}, "spec.pauseWaitTimeout in body should match"},
		{"schedule: drills into a namespace it backs up", "federation_v1alpha1_volumebackupschedule.yaml",
			[]mutation{{"spec.verify", map[string]any{"namespace": "tidb"}}}, "verify.namespace must not be a namespace the schedule backs up"},
		{"schedule: drills every 0th backup", "federation_v1alpha1_volumebackupschedule.yaml",
			[]mutation{{"spec.verify", map[string]any{"namespace": "tidb-drill", "every": 0}}}, "spec.verify.every in body should be greater than or equal to 1"},
		{"schedule: a zero drill timeout", "federation_v1alpha1_volumebackupschedule.yaml",
			[]mutation{{"spec.verify", map[string]any{"namespace": "tidb-drill", "timeout": "0s"}}}, "verify.timeout must be a positive duration"},
		{"schedule: template with a zero pauseWaitTimeout", "federation_v1alpha1_volumebackupschedule.yaml",
			[]mutation{{"spec.backupTemplate.pauseWaitTimeout", "0s"}}, "pauseWaitTimeout must be a positive duration"},
		{"backup: zero BR concurrency", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.br.concurrency", 0}}, "spec.template.br.concurrency in body should be greater than or equal to 1"},
		{"backup: too many clusters", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.clusters", manyClusters(33)}}, "Too many: 33: must have at most 32 items"},

		// The exit marker's volume and directory are the agent's (#19): a template volume of that
		// name would make every step pod invalid, a mount there would hide the marker.
		{"backup: additional volume named fedbr-exit", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.additionalVolumes", []any{map[string]any{"name": "fedbr-exit", "emptyDir": map[string]any{}}}}},
			"additionalVolumes cannot be named fedbr-exit"},
		{"backup: mount at the exit marker's directory", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.additionalVolumes", []any{map[string]any{"name": "scratch", "emptyDir": map[string]any{}}}},
				{"spec.template.additionalVolumeMounts", []any{map[string]any{"name": "scratch", "mountPath": "/var/run/fedbr-exit"}}}},
			"additionalVolumeMounts cannot mount at or under /var/run/fedbr-exit"},
		{"backup: mount under /run/fedbr-exit", "federation_v1alpha1_volumebackup.yaml",
			[]mutation{{"spec.template.additionalVolumeMounts", []any{map[string]any{"name": "scratch", "mountPath": "/run/fedbr-exit/main-terminated"}}}},
			"additionalVolumeMounts cannot mount at or under /var/run/fedbr-exit"},
		{"schedule: template volume named fedbr-exit", "federation_v1alpha1_volumebackupschedule.yaml",
			[]mutation{{"spec.backupTemplate.template.additionalVolumes", []any{map[string]any{"name": "fedbr-exit", "emptyDir": map[string]any{}}}}},
			"additionalVolumes cannot be named fedbr-exit"},
		{"restore: additional volume named fedbr-exit", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.template.additionalVolumes", []any{map[string]any{"name": "fedbr-exit", "emptyDir": map[string]any{}}}}},
			"additionalVolumes cannot be named fedbr-exit"},
		{"restore: mount under the exit marker's directory", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.template.additionalVolumeMounts", []any{map[string]any{"name": "scratch", "mountPath": "/var/run/fedbr-exit/sub"}}}},
			"additionalVolumeMounts cannot mount at or under /var/run/fedbr-exit"},
		{"backup member: additional volume named fedbr-exit", "dataplane_v1alpha1_volumebackupmember.yaml",
			[]mutation{{"spec.template.additionalVolumes", []any{map[string]any{"name": "fedbr-exit", "emptyDir": map[string]any{}}}}},
			"additionalVolumes cannot be named fedbr-exit"},
		{"restore member: mount at the exit marker's directory", "dataplane_v1alpha1_volumerestoremember.yaml",
			[]mutation{{"spec.template.additionalVolumeMounts", []any{map[string]any{"name": "scratch", "mountPath": "/var/run/fedbr-exit/"}}}},
			"additionalVolumeMounts cannot mount at or under /var/run/fedbr-exit"},

		// VolumeRestore
		{"restore: empty cluster list", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.clusters", []any{}}}, "clusters must name at least one data-plane cluster"},
		{"restore: duplicate k8sClusterName", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.clusters[2].k8sClusterName", "eks-use1-az2"}}, "k8sClusterName must be unique"},
		{"restore: missing tcNamespace", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.clusters[1].tcNamespace", nil}}, "spec.clusters[1].tcNamespace: Required value"},
		{"restore: scratch over two namespaces", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.template.scratch", true}, {"spec.clusters[2].tcNamespace", "tidb-drill"}}, "template.scratch needs one tcNamespace for every cluster"},
		{"restore: cross-AZ without azName", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.clusters[1].azName", nil}}, "crossAZ requires azName on every cluster"},
		{"restore: cross-AZ with empty azName", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.clusters[0].azName", ""}}, "crossAZ requires azName on every cluster"},
		{"restore: missing backup storage", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.clusters[0].backup", map[string]any{}}}, "exactly one storage provider (s3, gcs, azblob or local) must be set"},
		{"restore: unknown warm-up mode", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.template.warmup", "eager"}}, "spec.template.warmup: Unsupported value: \"eager\""},
		{"restore: unknown warm-up strategy", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.template.warmupStrategy", "dd"}}, "spec.template.warmupStrategy: Unsupported value: \"dd\""},
		{"restore: negative backoffLimit", "federation_v1alpha1_volumerestore.yaml",
			[]mutation{{"spec.template.backoffLimit", -1}}, "spec.template.backoffLimit in body should be greater than or equal to 0"},

		// VolumeBackupSchedule
		{"schedule: missing schedule", "federation_v1alpha1_volumebackupschedule.yaml",
			[]mutation{{"spec.schedule", nil}}, "spec.schedule: Required value"},
		{"schedule: words instead of cron", "federation_v1alpha1_volumebackupschedule.yaml",
			[]mutation{{"spec.schedule", "every day"}}, "schedule must be a cron expression with five fields"},
		{"schedule: minute out of range", "federation_v1alpha1_volumebackupschedule.yaml",
			[]mutation{{"spec.schedule", "60 * * * *"}}, "schedule must be a cron expression with five fields"},
		{"schedule: six fields", "federation_v1alpha1_volumebackupschedule.yaml",
			[]mutation{{"spec.schedule", "0 0 */6 * * *"}}, "schedule must be a cron expression with five fields"},
		{"schedule: retention in words", "federation_v1alpha1_volumebackupschedule.yaml",
			[]mutation{{"spec.maxReservedTime", "7days"}}, "maxReservedTime must be a duration such as 168h, 7d or 1d12h"},
		{"schedule: zero retention", "federation_v1alpha1_volumebackupschedule.yaml",
			[]mutation{{"spec.maxReservedTime", "0d"}}, "maxReservedTime must be longer than zero"},
		{"schedule: negative maxBackups", "federation_v1alpha1_volumebackupschedule.yaml",
			[]mutation{{"spec.maxBackups", -3}}, "maxBackups cannot be negative"},
		{"schedule: template with duplicate clusters", "federation_v1alpha1_volumebackupschedule.yaml",
			[]mutation{{"spec.backupTemplate.clusters[2].k8sClusterName", "eks-use1-az1"}}, "k8sClusterName must be unique"},
		{"schedule: template without storage", "federation_v1alpha1_volumebackupschedule.yaml",
			[]mutation{{"spec.backupTemplate.template.s3", nil}}, "exactly one storage provider"},

		// Members
		{"backup member: unknown phase", "dataplane_v1alpha1_volumebackupmember.yaml",
			[]mutation{{"spec.phase", "finish"}}, "spec.phase: Unsupported value: \"finish\""},
		{"restore member: unknown phase", "dataplane_v1alpha1_volumerestoremember.yaml",
			[]mutation{{"spec.phase", "restore-all"}}, "spec.phase: Unsupported value: \"restore-all\""},
	}
	if len(tests) < 20 {
		t.Fatalf("the issue asks for at least 20 bad objects, have %d", len(tests))
	}
	ctx := context.Background()
	ensureNamespace(t, "bad")
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := sample(t, tc.sample)
			obj.SetNamespace("bad")
			obj.SetName("bad-" + strconv.Itoa(i))
			for _, m := range tc.mutate {
				set(t, obj.Object, m.path, m.value)
			}
			err := env.Client.Create(ctx, obj)
			if err == nil {
				t.Fatalf("accepted; want refusal with %q", tc.wantMsg)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("error lacks %q:\n%v", tc.wantMsg, err)
			}
		})
	}
}

func manyClusters(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"k8sClusterName": "c" + strconv.Itoa(i), "tcName": "tc", "tcNamespace": "ns"}
	}
	return out
}

// TestRetentionAndScheduleFormsAccepted covers the forms upstream refused or users write.
func TestRetentionAndScheduleFormsAccepted(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(t, "good")
	forms := []struct{ schedule, retention string }{
		{"@daily", "168h"},
		{"0 2 * * mon-fri", "30d"},
		{"CRON_TZ=Asia/Shanghai 30 1 1,15 * *", "1d12h"},
		{"@every 6h", "90m"},
	}
	for i, f := range forms {
		obj := sample(t, "federation_v1alpha1_volumebackupschedule.yaml")
		obj.SetNamespace("good")
		obj.SetName("form-" + strconv.Itoa(i))
		set(t, obj.Object, "spec.schedule", f.schedule)
		set(t, obj.Object, "spec.maxReservedTime", f.retention)
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Errorf("schedule %q retention %q refused: %v", f.schedule, f.retention, err)
		}
	}
}

// TestSpecFrozenOnceStarted: clusters and storage cannot change under a running operation, while
// fields that do not affect it (cleanPolicy, skipGC) stay editable.
func TestSpecFrozenOnceStarted(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(t, "frozen")

	tests := []struct {
		name    string
		sample  string
		started bool
		mutate  mutation
		wantMsg string // empty: the update must succeed
	}{
		{"backup not started: clusters editable", "federation_v1alpha1_volumebackup.yaml", false,
			mutation{"spec.clusters[0].tcName", "other"}, ""},
		{"backup started: cluster change refused", "federation_v1alpha1_volumebackup.yaml", true,
			mutation{"spec.clusters[0].tcName", "other"}, "spec.clusters and the storage location cannot change after the backup has started"},
		{"backup started: storage change refused", "federation_v1alpha1_volumebackup.yaml", true,
			mutation{"spec.template.s3.prefix", "elsewhere"}, "cannot change after the backup has started"},
		{"backup started: cleanPolicy editable", "federation_v1alpha1_volumebackup.yaml", true,
			mutation{"spec.template.cleanPolicy", "Retain"}, ""},
		{"backup started: skipGC editable", "federation_v1alpha1_volumebackup.yaml", true,
			mutation{"skipGC", true}, ""},
		{"restore started: azName change refused", "federation_v1alpha1_volumerestore.yaml", true,
			mutation{"spec.clusters[0].azName", "us-east-1d"}, "spec.clusters cannot change after the restore has started"},
		{"restore started: crossAZ change refused", "federation_v1alpha1_volumerestore.yaml", true,
			mutation{"spec.crossAZ", false}, "spec.clusters cannot change after the restore has started"},
		{"restore not started: azName editable", "federation_v1alpha1_volumerestore.yaml", false,
			mutation{"spec.clusters[0].azName", "us-east-1d"}, ""},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := sample(t, tc.sample)
			obj.SetNamespace("frozen")
			obj.SetName("frozen-" + strconv.Itoa(i))
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
			if tc.started {
				set(t, obj.Object, "status.timeStarted", metav1.Now().UTC().Format(time.RFC3339))
				if err := env.Client.Status().Update(ctx, obj); err != nil {
					t.Fatalf("marking started: %v", err)
				}
			}
			set(t, obj.Object, tc.mutate.path, tc.mutate.value)
			err := env.Client.Update(ctx, obj)
			if tc.wantMsg == "" {
				if err != nil {
					t.Fatalf("update refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("want refusal with %q, got %v", tc.wantMsg, err)
			}
		})
	}
}

// TestMemberPhaseProtocol: a member's phase only moves forward and its identity never changes.
func TestMemberPhaseProtocol(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(t, "members")
	obj := sample(t, "dataplane_v1alpha1_volumebackupmember.yaml")
	obj.SetNamespace("members")
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		path, value string
		wantMsg     string
	}{
		{"spec.phase", "execute", ""},
		{"spec.phase", "initialize", "phase cannot go back from execute to initialize"},
		{"spec.phase", "teardown", ""},
		{"spec.phase", "execute", "phase cannot go back from teardown"},
		{"spec.tcName", "another", "tcName is immutable"},
		{"spec.k8sClusterName", "another", "k8sClusterName is immutable"},
	}
	for _, s := range steps {
		cur := obj.DeepCopy()
		set(t, cur.Object, s.path, s.value)
		err := env.Client.Update(ctx, cur)
		switch {
		case s.wantMsg == "" && err != nil:
			t.Fatalf("%s -> %s refused: %v", s.path, s.value, err)
		case s.wantMsg == "":
			obj = cur
		case err == nil || !strings.Contains(err.Error(), s.wantMsg):
			t.Fatalf("%s -> %s: want refusal with %q, got %v", s.path, s.value, s.wantMsg, err)
		}
	}
}

// TestRestoreMemberDataMemberSticks: the manager's mark of the data member may be set, never
// taken back (the agent may already have armed the step).
func TestRestoreMemberDataMemberSticks(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(t, "members")
	obj := sample(t, "dataplane_v1alpha1_volumerestoremember.yaml")
	obj.SetNamespace("members")
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	set(t, obj.Object, "spec.dataMember", true)
	if err := env.Client.Update(ctx, obj.DeepCopy()); err == nil || !strings.Contains(err.Error(), "dataMember and phase restore-data come with resolvedTS") {
		t.Fatalf("marking the data member without the decided ts: want refusal, got %v", err)
	}
	set(t, obj.Object, "spec.resolvedTS", "470802380936708097")
	if err := env.Client.Update(ctx, obj); err != nil {
		t.Fatalf("marking the data member refused: %v", err)
	}
	for _, s := range []struct {
		path    string
		value   any
		wantMsg string
	}{
		{"spec.dataMember", false, "dataMember cannot be unset"},
		{"spec.resolvedTS", "470802380936708098", "resolvedTS is immutable"},
		{"spec.resolvedTS", nil, "resolvedTS cannot be unset"},
	} {
		cur := obj.DeepCopy()
		if s.value == nil {
			unstructured.RemoveNestedField(cur.Object, strings.Split(s.path, ".")...)
		} else {
			set(t, cur.Object, s.path, s.value)
		}
		if err := env.Client.Update(ctx, cur); err == nil || !strings.Contains(err.Error(), s.wantMsg) {
			t.Errorf("%s -> %v: want refusal with %q, got %v", s.path, s.value, s.wantMsg, err)
		}
	}
}

// TestRestoreMemberGoCarriesTheResolvedTS: phase restore-data, the go of the data phase, comes
// with the ts the manager decided; a ts that is no decimal TSO is refused.
func TestRestoreMemberGoCarriesTheResolvedTS(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(t, "members")
	obj := sample(t, "dataplane_v1alpha1_volumerestoremember.yaml")
	obj.SetNamespace("members")
	obj.SetName("go-carries-ts")
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	cur := obj.DeepCopy()
	set(t, cur.Object, "spec.phase", "restore-data")
	if err := env.Client.Update(ctx, cur); err == nil || !strings.Contains(err.Error(), "dataMember and phase restore-data come with resolvedTS") {
		t.Fatalf("restore-data without the decided ts: want refusal, got %v", err)
	}
	for _, bad := range []string{"0", "-1", "12a", "123456789012345678901"} {
		cur := obj.DeepCopy()
		set(t, cur.Object, "spec.phase", "restore-data")
		set(t, cur.Object, "spec.resolvedTS", bad)
		if err := env.Client.Update(ctx, cur); err == nil || !strings.Contains(err.Error(), "spec.resolvedTS") {
			t.Errorf("resolvedTS %q: want refusal naming spec.resolvedTS, got %v", bad, err)
		}
	}
	set(t, obj.Object, "spec.phase", "restore-data")
	set(t, obj.Object, "spec.resolvedTS", "470802380936708097")
	if err := env.Client.Update(ctx, obj); err != nil {
		t.Fatalf("restore-data with the decided ts refused: %v", err)
	}
}

// TestBackupMemberBackupFailedSticks: the manager's word that the backup failed may be set,
// never taken back (the agent cleans per cleanPolicy on it once the member is deleted).
func TestBackupMemberBackupFailedSticks(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(t, "members")
	obj := sample(t, "dataplane_v1alpha1_volumebackupmember.yaml")
	obj.SetNamespace("members")
	obj.SetName("failed-backup")
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	set(t, obj.Object, "spec.backupFailed", true)
	if err := env.Client.Update(ctx, obj); err != nil {
		t.Fatalf("marking the backup failed refused: %v", err)
	}
	cur := obj.DeepCopy()
	set(t, cur.Object, "spec.backupFailed", false)
	if err := env.Client.Update(ctx, cur); err == nil || !strings.Contains(err.Error(), "backupFailed cannot be unset") {
		t.Fatalf("unmarking: want refusal with %q, got %v", "backupFailed cannot be unset", err)
	}
}

// TestAllCRDsServed checks every kind fedbr ships is served with its short name.
func TestAllCRDsServed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := env.Kubectl(ctx, "api-resources", "--categories=fedbr", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(out)
	sort.Strings(got)
	want := []string{
		"volumebackupmembers.dataplane.fedbr.io",
		"volumebackups.federation.pingcap.com",
		"volumebackupschedules.federation.pingcap.com",
		"volumerestoremembers.dataplane.fedbr.io",
		"volumerestores.federation.pingcap.com",
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("fedbr category serves %v, want %v", got, want)
	}
	for _, gvk := range testenv.CRDKinds() {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := env.Client.List(ctx, list); err != nil {
			t.Errorf("listing %s: %v", gvk.Kind, err)
		}
	}
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(name)
	if err := env.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TestInstallManifestsApply applies the CRDs, RBAC and the manager's Deployment the way an
// installation does. The CRDs
// are too large for client-side apply's last-applied annotation, so installs use --server-side.
func TestInstallManifestsApply(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, dir := range []string{"crd/bases", "rbac", "manager"} {
		out, err := env.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(env.RepoRoot, "config", dir))
		if err != nil {
			t.Fatalf("applying config/%s: %v", dir, err)
		}
		if !strings.Contains(out, "serverside-applied") {
			t.Errorf("config/%s: unexpected output %q", dir, out)
		}
	}
}
