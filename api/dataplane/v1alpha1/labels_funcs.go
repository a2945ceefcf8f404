package v1alpha1

import "strings"

// What a VolumeBackup's or VolumeRestore's labels and annotations become on the way to the
// pods: the manager copies them to every member it creates, and the agent copies a member's to
// every Job and pod template it builds. A user's IAM role annotation
// (eks.amazonaws.com/role-arn, iam.amazonaws.com/role), a sidecar opt-out
// (sidecar.istio.io/inject) or a cost label thus reach every step, size and warm-up pod of
// every data plane.
//
// Copied is every key except those fedbr owns (OwnedKey) and, for annotations, kubectl's
// last-applied-configuration (the owner's whole manifest, which would claim to be the member's).
// The labels and annotations fedbr sets on what it creates are applied after the copied ones,
// so a user's value never replaces them.

// lastApplied is kubectl's record of the last applied manifest (corev1.LastAppliedConfigAnnotation;
// the API package does not import k8s.io/api/core/v1 for one string).
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// ownedDomains are the key prefixes fedbr owns: fedbr.io and its subdomains (dataplane.fedbr.io:
// the member's owner labels and step clock, the agent's job labels) and the federation API group
// (finalizers, the schedule's scheduled-at annotation). A key there on a VolumeBackup is a control
// for that object alone — fedbr.io/force-remove copied to a member would drop the member's
// cleanup along with its own — or fedbr's bookkeeping, never something for the pods.
var ownedDomains = []string{"fedbr.io", "federation.pingcap.com"}

// OwnedKey says whether a label or annotation key belongs to fedbr itself.
func OwnedKey(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, d := range ownedDomains {
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return true
		}
	}
	return false
}

// CarriedLabels are the labels of in that travel on: all but fedbr's own.
func CarriedLabels(in map[string]string) map[string]string {
	return carried(in, func(k string) bool { return OwnedKey(k) })
}

// CarriedAnnotations are the annotations of in that travel on: all but fedbr's own and
// kubectl's last-applied-configuration.
func CarriedAnnotations(in map[string]string) map[string]string {
	return carried(in, func(k string) bool { return OwnedKey(k) || k == lastApplied })
}

func carried(in map[string]string, drop func(string) bool) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		if !drop(k) {
			out[k] = v
		}
	}
	return out
}
