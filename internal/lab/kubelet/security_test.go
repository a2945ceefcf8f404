package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/fedbr/fedbr/internal/lab/loopfs"
)

func TestContainerIdentity(t *testing.T) {
	pod := func(sc *corev1.PodSecurityContext) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"},
			Spec: corev1.PodSpec{SecurityContext: sc}}
	}
	tests := []struct {
		name    string
		pod     *corev1.PodSecurityContext
		c       *corev1.SecurityContext
		want    identity
		wantErr string
	}{
		{name: "no securityContext: the image's user, root", want: identity{}},
		{name: "pod's user and group", pod: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](2000)},
			want: identity{uid: 1000, gid: 2000}},
		{name: "container's over the pod's", pod: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](2000)},
			c: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1001), RunAsGroup: ptr.To[int64](2001)}, want: identity{uid: 1001, gid: 2001}},
		{name: "user without group: the image's group, root", pod: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532)},
			want: identity{uid: 65532}},
		{name: "fsGroup then supplementalGroups", pod: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1), FSGroup: ptr.To[int64](3000),
			SupplementalGroups: []int64{4000, 3000}}, want: identity{uid: 1, groups: []uint32{3000, 4000}}},
		{name: "runAsNonRoot with a non-root user", pod: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532)},
			want: identity{uid: 65532}},
		{name: "runAsNonRoot, image's user root", pod: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			wantErr: `container has runAsNonRoot and image will run as root (pod: "p_ns(u1)", container: c)`},
		{name: "container's runAsNonRoot, image's user root", c: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			wantErr: `container has runAsNonRoot and image will run as root (pod: "p_ns(u1)", container: c)`},
		{name: "runAsNonRoot with runAsUser 0", pod: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, c: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)},
			wantErr: `container's runAsUser breaks non-root policy (pod: "p_ns(u1)", container: c)`},
		{name: "container lifts the pod's runAsNonRoot", pod: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			c: &corev1.SecurityContext{RunAsNonRoot: ptr.To(false)}, want: identity{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := containerIdentity(pod(tc.pod), &corev1.Container{Name: "c", SecurityContext: tc.c})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(identity{})); diff != "" {
				t.Errorf("identity (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOwnershipApplies(t *testing.T) {
	pvc := func(ro bool) corev1.VolumeSource {
		return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c", ReadOnly: ro}}
	}
	tests := []struct {
		name            string
		src             corev1.VolumeSource
		ebs             bool
		apply, readOnly bool
	}{
		{"emptyDir", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, false, true, false},
		{"secret", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}, false, true, true},
		{"configMap", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}, false, true, true},
		{"downwardAPI", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}, false, true, true},
		{"projected", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}, false, true, true},
		{"EBS claim", pvc(false), true, true, false},
		{"read-only EBS claim", pvc(true), true, true, true},
		{"hostPath or local claim", pvc(false), false, false, false},
		{"hostPath", corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}, false, false, false},
	}
	for _, tc := range tests {
		apply, ro := ownershipApplies(tc.src, tc.ebs)
		if apply != tc.apply || ro != tc.readOnly {
			t.Errorf("%s: ownershipApplies = %v, %v; want %v, %v", tc.name, apply, ro, tc.apply, tc.readOnly)
		}
	}
}

// owner returns a path's group and mode bits (permissions and setgid), not following links.
func owner(t *testing.T, path string) (gid uint32, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Gid, fi.Mode() & (os.ModePerm | os.ModeSetgid)
}

func TestSetVolumeOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	mk := func(t *testing.T) string {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "sub", "f"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Run("read-write", func(t *testing.T) {
		dir := mk(t)
		if err := setVolumeOwnership(dir, ptr.To[int64](3000), nil, false); err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]os.FileMode{dir: 0o775 | os.ModeSetgid, filepath.Join(dir, "sub"): 0o770 | os.ModeSetgid, filepath.Join(dir, "sub", "f"): 0o660} {
			if gid, mode := owner(t, path); gid != 3000 || mode != want {
				t.Errorf("%s: group %d mode %s, want 3000 %s", path, gid, mode, want)
			}
		}
	})
	t.Run("read-only", func(t *testing.T) {
		dir := mk(t)
		if err := setVolumeOwnership(dir, ptr.To[int64](3000), nil, true); err != nil {
			t.Fatal(err)
		}
		if gid, mode := owner(t, filepath.Join(dir, "sub", "f")); gid != 3000 || mode != 0o640 {
			t.Errorf("file: group %d mode %s, want 3000 -rw-r-----", gid, mode)
		}
	})
	t.Run("OnRootMismatch leaves a matching root's volume", func(t *testing.T) {
		dir := mk(t)
		if err := os.Chown(dir, 0, 3000); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o775|os.ModeSetgid); err != nil {
			t.Fatal(err)
		}
		if err := setVolumeOwnership(dir, ptr.To[int64](3000), ptr.To(corev1.FSGroupChangeOnRootMismatch), false); err != nil {
			t.Fatal(err)
		}
		if gid, mode := owner(t, filepath.Join(dir, "sub", "f")); gid != 0 || mode != 0o600 {
			t.Errorf("file under a matching root: group %d mode %s, want untouched 0 -rw-------", gid, mode)
		}
	})
	t.Run("OnRootMismatch changes a mismatching root's volume", func(t *testing.T) {
		dir := mk(t)
		if err := setVolumeOwnership(dir, ptr.To[int64](3000), ptr.To(corev1.FSGroupChangeOnRootMismatch), false); err != nil {
			t.Fatal(err)
		}
		if gid, mode := owner(t, filepath.Join(dir, "sub", "f")); gid != 3000 || mode != 0o660 {
			t.Errorf("file: group %d mode %s, want 3000 -rw-rw----", gid, mode)
		}
	})
	t.Run("no fsGroup", func(t *testing.T) {
		dir := mk(t)
		if err := setVolumeOwnership(dir, nil, nil, false); err != nil {
			t.Fatal(err)
		}
		if gid, mode := owner(t, filepath.Join(dir, "sub", "f")); gid != 0 || mode != 0o600 {
			t.Errorf("file: group %d mode %s, want untouched", gid, mode)
		}
	})
}

func TestFreshFilesystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	dir := t.TempDir() // 0700, as a new volume folder may be
	if err := freshFilesystem(dir); err != nil {
		t.Fatal(err)
	}
	if gid, mode := owner(t, dir); gid != 0 || mode != 0o755 {
		t.Errorf("root: group %d mode %s, want 0 drwxr-xr-x", gid, mode)
	}
	lf := filepath.Join(dir, "lost+found")
	if gid, mode := owner(t, lf); gid != 0 || mode != 0o700 {
		t.Errorf("lost+found: group %d mode %s, want 0 drwx------", gid, mode)
	}
	// A volume with data is not formatted again.
	if err := os.Remove(lf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := freshFilesystem(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lf); !os.IsNotExist(err) {
		t.Errorf("lost+found made in a volume with data: %v", err)
	}
}

// TestContainerRunsAsItsUser runs a shell as user 1001 (the container's runAsUser over the
// pod's 1000), group 2000, supplementary groups fsGroup 3000 and 4000, and has it report its
// ids and what it sees of its volumes: fsGroup applied to the emptyDir, the secret, the token
// and a fresh EBS volume (which has mkfs's lost+found), not to the hostPath; the token 0600 (0640
// with fsGroup's group read) owned by the pod's one runAsUser; the container's root not
// writable.
func TestContainerRunsAsItsUser(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	core := l.client.CoreV1()
	if _, err := core.Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Data: map[string][]byte{"password": []byte("hunter2")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	volID := l.freshVolume(ctx, t, ns)
	host := t.TempDir()
	for _, d := range []string{filepath.Dir(host), host} { // MkdirTemp's 0700: let user 1001 in
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := `id -u; id -g; id -G
R=$FEDBR_LAB_ROOT
stat -L -c 'scratch %g %a' $R/scratch
stat -L -c 'secret %g %a' $R/etc/secret/password
stat -L -c 'token %u %g %a' $R/var/run/secrets/kubernetes.io/serviceaccount/token
stat -L -c 'host %g' $R/host
stat -L -c 'data %u %g %a' $R/data
stat -L -c 'lost+found %u %g %a' $R/data/lost+found
echo x > $R/scratch/x && echo scratch writable
echo x > $R/data/x && echo data writable
(echo x > $R/x) 2>/dev/null || echo root refused`
	c := corev1.Container{Name: "probe", Image: "shell:latest", Command: []string{"sh", "-c", script},
		SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1001), ReadOnlyRootFilesystem: ptr.To(true)},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "scratch", MountPath: "/scratch"}, {Name: "secret", MountPath: "/etc/secret"},
			{Name: "host", MountPath: "/host"}, {Name: "data", MountPath: "/data"},
		}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ids", Namespace: ns}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{c},
		SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](2000),
			FSGroup: ptr.To[int64](3000), SupplementalGroups: []int64{4000}},
		Volumes: []corev1.Volume{
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
			{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
		},
	}}
	if _, err := core.Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := l.waitPod(ctx, t, ns, "ids", "finished", func(p *corev1.Pod) bool { return terminalPhase(p.Status.Phase) })
	out := l.logs(ctx, t, ns, "ids")
	want := `1001
2000
2000 3000 4000
scratch 3000 2777
secret 3000 644
token 1001 3000 640
host 0
data 0 3000 2775
lost+found 0 3000 2770
scratch writable
data writable
root refused
`
	if got.Status.Phase != corev1.PodSucceeded || out != want {
		t.Errorf("phase %s, output (-want +got):\n%s", got.Status.Phase, cmp.Diff(want, out))
	}
	t.Logf("volume %s", volID)
}

// freshVolume creates a new EBS volume in the node's zone and a claim "data" bound to it.
func (l *lab) freshVolume(ctx context.Context, t *testing.T, ns string, mode ...corev1.PersistentVolumeMode) string {
	t.Helper()
	ebs, err := NewEC2(ctx, l.admin.Endpoint, strings.TrimSuffix(l.zone, "a"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := ebs.CreateVolume(ctx, VolumeRequest{Zone: l.zone, SizeGiB: 1, Token: ns})
	if err != nil {
		t.Fatal(err)
	}
	core := l.client.CoreV1()
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + ns}, Spec: corev1.PersistentVolumeSpec{
		Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: EBSDriver, VolumeHandle: id}},
		ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: "data"},
	}}
	if len(mode) > 0 {
		pv.Spec.VolumeMode = &mode[0]
	}
	if _, err := core.PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		VolumeName:       pv.Name,
		StorageClassName: new(""),
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	if len(mode) > 0 {
		pvc.Spec.VolumeMode = &mode[0]
	}
	if _, err := core.PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestRunAsNonRootRefusesRoot: a container with runAsNonRoot whose user would be root (the
// image's) never starts: it waits in CreateContainerConfigError with the kubelet's message.
func TestRunAsNonRootRefusesRoot(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	c := corev1.Container{Name: "probe", Image: "shell:latest", Command: []string{"sh", "-c", "id -u"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: ns}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{c},
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
	}}
	created, err := l.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := `container has runAsNonRoot and image will run as root (pod: "root_` + ns + `(` + string(created.UID) + `)", container: probe)`
	got := l.waitPod(ctx, t, ns, "root", "refused", func(p *corev1.Pod) bool {
		if len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == ReasonCreateContainerConfigError
	})
	if msg := got.Status.ContainerStatuses[0].State.Waiting.Message; msg != want {
		t.Errorf("message %q, want %q", msg, want)
	}
	if err := l.client.CoreV1().Pods(ns).Delete(ctx, "root", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
		t.Fatal(err)
	}
	l.waitGone(ctx, t, ns, "root")
}

// TestRawBlockClaim: a volumeMode Block claim of an EBS volume reaches the container as the
// volume's device at its devicePath, never formatted or mounted (what the container writes is
// at the device's first bytes); once the pod is gone the device is detached with the volume.
func TestRawBlockClaim(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	volID := l.freshVolume(ctx, t, ns, corev1.PersistentVolumeBlock)
	v, err := l.admin.Volume(ctx, volID)
	if err != nil || v.Image == "" {
		t.Fatalf("volume %s: %+v, %v; want an image", volID, v, err)
	}
	script := `D=$FEDBR_LAB_ROOT/dev/xvdf
test -b $D && echo block device
printf raw-block-bytes | dd of=$D conv=notrunc status=none && echo written`
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "raw", Namespace: ns}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "probe", Image: "shell:latest", Command: []string{"sh", "-c", script},
			VolumeDevices: []corev1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvdf"}}}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
	}}
	if _, err := l.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := l.waitPod(ctx, t, ns, "raw", "finished", func(p *corev1.Pod) bool { return terminalPhase(p.Status.Phase) })
	if out := l.logs(ctx, t, ns, "raw"); got.Status.Phase != corev1.PodSucceeded || out != "block device\nwritten\n" {
		t.Fatalf("phase %s, output %q", got.Status.Phase, out)
	}
	for {
		if v, err = l.admin.Volume(ctx, volID); err != nil {
			t.Fatal(err)
		}
		dev, err := loopfs.LoopDevice(v.Image)
		if err != nil {
			t.Fatal(err)
		}
		if v.InstanceID == "" && dev == "" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("volume %s: attached to %q, loop device %q after its pod finished", volID, v.InstanceID, dev)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f, err := os.Open(v.Image)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	head := make([]byte, len("raw-block-bytes"))
	if _, err := f.ReadAt(head, 0); err != nil || string(head) != "raw-block-bytes" {
		t.Errorf("the device's first bytes %q, %v; want what the container wrote", head, err)
	}
	if formatted, err := loopfs.Formatted(v.Image); err != nil || formatted {
		t.Errorf("the raw block volume was formatted (%v, %v)", formatted, err)
	}
}
