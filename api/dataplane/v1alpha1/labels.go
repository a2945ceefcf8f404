package v1alpha1

// Labels and annotations the manager puts on every member it creates. A member lives in another
// cluster than its VolumeBackup or VolumeRestore, so an owner reference cannot link them; these
// labels do, and the manager's watches map a member event back to its owner with them.
const (
	// LabelOwnerName is the owning VolumeBackup's or VolumeRestore's name.
	LabelOwnerName = "dataplane.fedbr.io/owner-name"
	// LabelOwnerNamespace is its namespace in the control plane.
	LabelOwnerNamespace = "dataplane.fedbr.io/owner-namespace"
	// LabelOwnerUID is its uid: a member with the same name but another owner uid belongs to
	// someone else (two control-plane namespaces with equally named backups of one TidbCluster)
	// and is never adopted.
	LabelOwnerUID = "dataplane.fedbr.io/owner-uid"
	// AnnotationPhaseSince is when the manager last moved the member to a new spec.phase
	// (RFC 3339), the start of that step's timeout.
	AnnotationPhaseSince = "dataplane.fedbr.io/phase-since"
)
