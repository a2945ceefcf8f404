package job

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Every step container, when its command ends (success or failure), writes ExitMarker and then
// waits its Job's exit delay before exiting, so that a mesh or log sidecar in the step's pod can
// wait for the marker, finish and exit too: a sidecar that never exits keeps a Job's pod, and
// so the step, from completing. `fedbr` itself does it (internal/cmd/root.Exit), driven by
// these variables. The marker lives in an emptyDir, ExitVolume, mounted at ExitDir: a sidecar
// that mounts the same volume sees it.
const (
	EnvExitMarker = "FEDBR_EXIT_MARKER"
	EnvExitDelay  = "FEDBR_EXIT_DELAY"
	ExitVolume    = "fedbr-exit"
	ExitDir       = "/var/run/fedbr-exit"
	ExitMarker    = ExitDir + "/main-terminated"
)

// DefaultStepExitDelay is the agent's --step-exit-delay by default: none, so no step's pod
// ends later than its work; a mesh whose sidecar needs time after the marker is given some.
const DefaultStepExitDelay time.Duration = 0

// sidecarSafe gives the step container of pod the exit marker's volume and variables, and
// the delay. It adds nothing else: init containers, native sidecars among them
// (restartPolicy Always, which Kubernetes stops once the step container exited), stay as
// they are.
func sidecarSafe(pod *corev1.PodSpec, delay time.Duration) {
	// Clipped: appending never writes into the caller's slices.
	pod.Volumes = append(slices.Clip(pod.Volumes), corev1.Volume{Name: ExitVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	c := &pod.Containers[0]
	c.VolumeMounts = append(slices.Clip(c.VolumeMounts), corev1.VolumeMount{Name: ExitVolume, MountPath: ExitDir})
	c.Env = append([]corev1.EnvVar{{Name: EnvExitMarker, Value: InPod(ExitMarker)}, {Name: EnvExitDelay, Value: max(delay, 0).String()}}, c.Env...)
}
