package meta

import (
	"fmt"
	"regexp"
	"strings"
)

// Tag keys carrying fedbr's identity on every snapshot and volume it creates, so a sweeper
// can find what a backup or restore left behind even when its metadata is gone.
const (
	TagBackup  = "fedbr.io/backup"
	TagRestore = "fedbr.io/restore"
)

// Tag keys marking a resource that its step has not recorded yet, with the owner (see Owner)
// of the member the step runs for as value. A snapshot carries TagBackupPending from its
// CreateSnapshots until its backup completes (the step removes it just before it marks
// backupmeta completed); a volume carries TagRestorePending from its CreateVolume until
// restore-volumes records it in restoremeta. What still carries one when its member is gone
// was never recorded — a create whose answer was lost, a failed attempt whose cleanup did not
// finish — and is what the agent's orphan sweeper may delete. Snapshots and volumes have
// separate keys because a snapshot copies its volume's tags.
const (
	TagBackupPending  = "fedbr.io/backup-pending"
	TagRestorePending = "fedbr.io/restore-pending"
)

// TagNamespace is the Kubernetes namespace of the member a snapshot or volume was made for
// (Owner.Namespace): every snapshot the backup step and every volume restore-volumes creates
// carries it from its create call on, and fedbr never removes or changes it. It is what a
// per-namespace IAM policy conditions on (docs/iam/fedbr-steps-per-namespace.json): a step
// identity may create only what carries its own namespace (aws:RequestTag) and delete, untag
// or read the blocks of only what carries it (aws:ResourceTag). A volume restored into
// namespace B from a backup taken in A carries B; the snapshot's A is kept only under the
// copied key snapshot/fedbr.io/namespace.
const TagNamespace = "fedbr.io/namespace"

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidateID checks a backup or restore identity: 1–128 letters, digits, '.', '_' or '-',
// starting with a letter or digit, so it is both a valid AWS tag value and one object-name
// segment.
func ValidateID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("identity %q: want 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", id)
	}
	return nil
}

// BackupTags are the identity tags of a backup's snapshots.
func BackupTags(backupID string) map[string]string { return map[string]string{TagBackup: backupID} }

// RestoreTags are the identity tags of a restore's volumes.
func RestoreTags(restoreID string) map[string]string {
	return map[string]string{TagRestore: restoreID}
}

// Owner names where the member a resource was made for lives: the Kubernetes cluster (the uid
// of its kube-system namespace, which outlives any agent and differs between clusters that
// share an AWS account) and the member's namespace. It is the value of the pending tags.
type Owner struct {
	Cluster   string
	Namespace string
}

// String is the tag value, "<cluster>/<namespace>".
func (o Owner) String() string { return o.Cluster + "/" + o.Namespace }

var (
	clusterIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,63}$`)
	namespacePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
)

// Validate checks both parts: a cluster id of letters, digits and '-' (a uid), and a
// namespace name.
func (o Owner) Validate() error {
	if !clusterIDPattern.MatchString(o.Cluster) {
		return fmt.Errorf("owner %q: cluster id %q: want 1-64 letters, digits or '-'", o, o.Cluster)
	}
	if !namespacePattern.MatchString(o.Namespace) {
		return fmt.Errorf("owner %q: namespace %q: want a namespace name (DNS-1123 label)", o, o.Namespace)
	}
	return nil
}

// ParseOwner reads a pending tag's value.
func ParseOwner(v string) (Owner, error) {
	cluster, ns, ok := strings.Cut(v, "/")
	if !ok {
		return Owner{}, fmt.Errorf("owner %q: want <cluster>/<namespace>", v)
	}
	o := Owner{Cluster: cluster, Namespace: ns}
	return o, o.Validate()
}

// PendingBackupTags are the tags of a snapshot its backup has not completed yet; nil without
// an owner (nothing will sweep it).
func PendingBackupTags(owner *Owner) map[string]string {
	if owner == nil {
		return nil
	}
	return map[string]string{TagBackupPending: owner.String()}
}

// PendingRestoreTags are the tags of a volume its restore has not recorded yet; nil without
// an owner.
func PendingRestoreTags(owner *Owner) map[string]string {
	if owner == nil {
		return nil
	}
	return map[string]string{TagRestorePending: owner.String()}
}

// NamespaceTags are the permanent tags of what a step creates for owner: TagNamespace with
// the owner's namespace; nil without an owner.
func NamespaceTags(owner *Owner) map[string]string {
	if owner == nil {
		return nil
	}
	return map[string]string{TagNamespace: owner.Namespace}
}
