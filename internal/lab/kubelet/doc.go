// Package kubelet is the lab's node: a virtual-kubelet (node.NodeController and
// node.PodController from github.com/virtual-kubelet/virtual-kubelet) whose provider runs
// every container of every pod bound to the node as a local process. It is what
// `fedbr-lab lab node` runs, one per lab node.
//
// # What behaves as on a real node
//
//   - Images map to local executables through Images (PATTERN=PATH rules; see ImageRule).
//     Without a command the entrypoint runs with the container's args; a command whose
//     first word has the entrypoint's base name runs the entrypoint, any other first word
//     runs that host executable. An unmapped image fails the pod with reason ErrImagePull.
//   - Environment: env (with $(VAR) expansion in env, command and args), envFrom,
//     valueFrom fieldRef (metadata.name/namespace/uid/labels/annotations, spec.nodeName,
//     spec.serviceAccountName, status.podIP/hostIP), resourceFieldRef, secretKeyRef,
//     configMapKeyRef. Pods also get KUBERNETES_SERVICE_HOST/PORT (the real API server
//     address), HOSTNAME (the pod name), PATH (the node's), HOME and FEDBR_LAB_ROOT.
//     Missing secrets or configmaps keep the container waiting in
//     CreateContainerConfigError and are retried, as on a kubelet.
//   - Volumes: emptyDir, secret, configMap, downwardAPI, projected (serviceAccountToken
//     through the TokenRequest API bound to the pod, configMap, secret, downwardAPI — which
//     covers the kube-api-access volume with token, ca.crt and namespace), hostPath, and
//     persistentVolumeClaim bound to a CSI ebs.csi.aws.com PV (volumeHandle = AWS-double
//     volume id, resolved with a VolumeResolver such as AWSAdmin), a hostPath PV or a local
//     PV. A PVC that is not bound yet keeps the pod pending and is retried. A volume attached
//     to another instance than the node's is refused.
//   - Lifecycle: init containers in order, then containers in parallel; restartPolicy
//     Always/OnFailure/Never with the kubelet's doubling backoff (CrashLoopBackOff, restart
//     counts, last termination state); exit codes (128+signal when killed);
//     activeDeadlineSeconds (reason DeadlineExceeded); deletion sends SIGTERM to the
//     container's process group, waits the grace period (at least 2 s, like the kubelet;
//     a shorter second delete shortens it), then SIGKILL, and removes the pod object as
//     soon as its processes are gone. When a container's main process exits, the rest of
//     its process group is killed, as a container's pid namespace would be.
//   - Users: each container runs as its securityContext's user and group (the container's
//     runAsUser/runAsGroup over the pod's; without runAsUser the image's user, which for every
//     lab image is root, 0; without runAsGroup group 0), with the pod's fsGroup and
//     supplementalGroups as supplementary groups. runAsNonRoot with user 0 keeps the container
//     waiting in CreateContainerConfigError with the kubelet's message. The node must run as
//     root to switch users; it lets other users traverse its folder and the folders above it
//     (g+x, o+x), so that a non-root container reaches its root folder.
//   - Volume ownership: with an fsGroup, emptyDir, secret, configMap, downwardAPI and projected
//     volumes and EBS claims get the kubelet's ownership change (group fsGroup, group
//     read/write — read only for the read-only volume types — setgid and group search on
//     directories; fsGroupChangePolicy OnRootMismatch honoured); hostPath and local volumes
//     never. emptyDir is 0777; secret, configMap and downwardAPI files have their mode
//     (defaultMode, item mode) exactly; the service-account token is 0600 owned by the pod's
//     runAsUser (when every container has the same) when the pod has an fsGroup or such a user.
//     A new EBS volume, empty on its first mount, becomes a fresh ext4 root: root:root 0755
//     with lost+found root:root 0700.
//   - Status: phase, PodReadyToStartContainers/Initialized/ContainersReady/Ready
//     conditions, container states, hostIP/podIP (the node address: pods share the host
//     network).
//   - Logs: stdout and stderr of each run go to
//     <dir>/logs/<namespace>_<pod>_<uid>/<container>/<restartCount>.log (kept after the
//     pod is deleted) and are served on the kubelet API port, so `kubectl logs` (with
//     --previous, --tail, --limit-bytes, -f) works through the API server.
//   - The Node: Ready condition, capacity/allocatable, InternalIP, kubelet port, a lease,
//     labels topology.kubernetes.io/zone and region, topology.ebs.csi.aws.com/zone, and for
//     an instance spec.providerID aws:///ZONE/INSTANCE plus annotation
//     lab.fedbr.io/instance-id.
//
// # Mounts without mount namespaces
//
// Nothing is mounted. Each container gets a root folder
// <dir>/pods/<ns>_<pod>_<uid>/containers/<name>/root, passed as $FEDBR_LAB_ROOT, in which
// each volumeMount is a symlink at its mountPath to the volume's directory (or subPath).
// The process sees the host filesystem: a program must open $FEDBR_LAB_ROOT/data for a
// volume mounted at /data, and in-cluster clients must read the token from
// $FEDBR_LAB_ROOT/var/run/secrets/kubernetes.io/serviceaccount. The working directory is
// root+workingDir (root when unset), so relative paths land in the container's folder.
//
// # Limits
//
//   - No isolation: processes share the host network, PID space and filesystem; resource
//     limits, capabilities, seccomp, privileged and readOnly mounts are not enforced, nor
//     readOnlyRootFilesystem for a container running as root (a non-root one cannot write its
//     root folder, which is root's, 0755); nested mount paths (a mount inside another) are
//     refused. Volumes are folders, not file systems: an EBS volume's lost+found is made on its
//     first mount, and a volume restored from a snapshot has only the files captured.
//   - Secret, configMap and token files are written once when the pod starts and never
//     updated; the token is not refreshed.
//   - Probes, lifecycle hooks (postStart, preStop), sidecar init containers
//     (restartPolicy Always on an init container), ephemeral containers, exec, attach and
//     port-forward are not supported; containers are ready as soon as they run.
//   - Service environment variables (enableServiceLinks) are not injected; image updates
//     of a running pod are ignored.
//   - kubectl logs ignores --timestamps and --since: the files hold raw output.
//   - The kubelet API has no authentication; it listens on the node address (loopback).
//   - If the node process is killed with SIGKILL, each container's main process gets
//     SIGKILL from the kernel (Pdeathsig), but its children may survive; so do processes
//     that leave their process group (setsid) at any time.
package kubelet
