package kubelet

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

func TestImagesEntrypoint(t *testing.T) {
	im := Images{
		{Pattern: "fedbr", Entrypoint: "/bin/fedbr"},
		{Pattern: "ghcr.io/fedbr/*", Entrypoint: "/bin/fedbr2"},
		{Pattern: "pingcap/tikv:v8.*", Entrypoint: "/bin/tikv"},
	}
	tests := []struct{ image, want string }{
		{"fedbr", "/bin/fedbr"},
		{"fedbr:v1.2", "/bin/fedbr"},
		{"fedbr@sha256:abc", "/bin/fedbr"},
		{"ghcr.io/fedbr/fedbr:latest", "/bin/fedbr2"},
		{"pingcap/tikv:v8.5.0", "/bin/tikv"},
		{"pingcap/tikv:v7.5.0", ""},
		{"localhost:5000/fedbr", ""},
		{"other", ""},
	}
	for _, tc := range tests {
		got, err := im.Entrypoint(tc.image)
		if tc.want == "" {
			if !errors.Is(err, ErrImageNotMapped) {
				t.Errorf("Entrypoint(%q) = %q, %v; want ErrImageNotMapped", tc.image, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Entrypoint(%q) = %q, %v; want %q", tc.image, got, err, tc.want)
		}
	}
}

func TestParseImageRule(t *testing.T) {
	r, err := ParseImageRule("fedbr=/usr/bin/fedbr")
	if err != nil || r.Pattern != "fedbr" || r.Entrypoint != "/usr/bin/fedbr" {
		t.Errorf("ParseImageRule = %+v, %v", r, err)
	}
	for _, bad := range []string{"fedbr", "=/x", "fedbr="} {
		if _, err := ParseImageRule(bad); err == nil {
			t.Errorf("ParseImageRule(%q) succeeded", bad)
		}
	}
}

func TestArgv(t *testing.T) {
	tests := []struct {
		name          string
		command, args []string
		want          []string
	}{
		{"args only", nil, []string{"agent", "--x"}, []string{"/opt/fedbr", "agent", "--x"}},
		{"command names the entrypoint", []string{"/fedbr", "agent"}, []string{"--x"}, []string{"/opt/fedbr", "agent", "--x"}},
		{"host executable", []string{"/bin/sh", "-c", "true"}, nil, []string{"/bin/sh", "-c", "true"}},
	}
	for _, tc := range tests {
		got, err := argv("/opt/fedbr", tc.command, tc.args)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: argv = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := argv("/opt/fedbr", []string{"/no/such/binary"}, nil); err == nil {
		t.Error("argv accepted a command that is neither the entrypoint nor a host executable")
	}
}

func TestExpand(t *testing.T) {
	vals := map[string]string{"A": "1", "B": "two"}
	tests := map[string]string{
		"$(A)-$(B)":   "1-two",
		"$(C)":        "$(C)",
		"$$(A)":       "$(A)",
		"cost $5":     "cost $5",
		"$(A":         "$(A",
		"trailing $":  "trailing $",
		"x$(A)y$(A)z": "x1y1z",
	}
	for in, want := range tests {
		if got := expand(in, vals); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPhaseOf(t *testing.T) {
	running := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	exited := func(code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
	}
	initial := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonContainerCreating}}}
	backoff := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonCrashLoopBackOff}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}
	st := func(init, main []corev1.ContainerStatus) corev1.PodStatus {
		return corev1.PodStatus{InitContainerStatuses: init, ContainerStatuses: main}
	}
	never, onFailure, always := corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure, corev1.RestartPolicyAlways
	tests := []struct {
		name string
		in   podState
		want corev1.PodPhase
	}{
		{"creating", podState{policy: never, status: st(nil, []corev1.ContainerStatus{initial})}, corev1.PodPending},
		{"running", podState{policy: never, status: st(nil, []corev1.ContainerStatus{running})}, corev1.PodRunning},
		{"succeeded", podState{policy: never, status: st(nil, []corev1.ContainerStatus{exited(0)})}, corev1.PodSucceeded},
		{"failed", podState{policy: never, status: st(nil, []corev1.ContainerStatus{exited(0), exited(2)})}, corev1.PodFailed},
		{"one still running", podState{policy: never, status: st(nil, []corev1.ContainerStatus{exited(2), running})}, corev1.PodRunning},
		{"crash loop", podState{policy: always, status: st(nil, []corev1.ContainerStatus{backoff})}, corev1.PodRunning},
		{"on failure succeeded", podState{policy: onFailure, status: st(nil, []corev1.ContainerStatus{exited(0)})}, corev1.PodSucceeded},
		{"init running", podState{policy: never, status: st([]corev1.ContainerStatus{running}, []corev1.ContainerStatus{initial})}, corev1.PodPending},
		{"init failed, never", podState{policy: never, status: st([]corev1.ContainerStatus{exited(1)}, []corev1.ContainerStatus{initial})}, corev1.PodFailed},
		{"init failed, restarting", podState{policy: always, status: st([]corev1.ContainerStatus{backoff}, []corev1.ContainerStatus{initial})}, corev1.PodPending},
		{"deleted while creating", podState{policy: always, stopping: true, status: st(nil, []corev1.ContainerStatus{initial})}, corev1.PodFailed},
		{"deleted, killed", podState{policy: always, stopping: true, status: st(nil, []corev1.ContainerStatus{exited(143)})}, corev1.PodFailed},
		{"deleted, clean exit", podState{policy: always, stopping: true, status: st(nil, []corev1.ContainerStatus{exited(0)})}, corev1.PodSucceeded},
		{"deadline, still stopping", podState{policy: never, stopping: true, status: corev1.PodStatus{Reason: ReasonDeadlineExceeded, ContainerStatuses: []corev1.ContainerStatus{running}}}, corev1.PodRunning},
		{"deadline, stopped", podState{policy: never, stopping: true, status: corev1.PodStatus{Reason: ReasonDeadlineExceeded, ContainerStatuses: []corev1.ContainerStatus{exited(0)}}}, corev1.PodFailed},
		{"image not mapped", podState{policy: never, status: corev1.PodStatus{Reason: ReasonErrImagePull, ContainerStatuses: []corev1.ContainerStatus{exited(128)}}}, corev1.PodFailed},
	}
	for _, tc := range tests {
		if got := phaseOf(tc.in); got != tc.want {
			t.Errorf("%s: phaseOf = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestTail(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 1, "c\n"},
		{"a\n", 5, "a\n"},
		{"", 3, ""},
	}
	for _, tc := range tests {
		if got := string(tail([]byte(tc.in), tc.n)); got != tc.want {
			t.Errorf("tail(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// TestMakeTraversable: a 0700 test folder and its subfolder become traversable by the group
// and others, and nothing becomes readable: a container running as user 65532 with group 0 (no
// runAsGroup, as the kubelet runs it) is decided by the folder's group bits when the folder
// is root's, and would get "permission denied" executing anything below it otherwise.
func TestMakeTraversable(t *testing.T) {
	top := filepath.Join(t.TempDir(), "lab")
	sub := filepath.Join(top, "node")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(top, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := makeTraversable(klog.Background(), sub); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{top, sub} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o711 {
			t.Errorf("%s: mode %o, want 711", d, got)
		}
	}
}
