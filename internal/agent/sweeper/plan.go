package sweeper

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fedbr/fedbr/internal/agent/metrics"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/meta"
)

// Scope is what this agent may sweep: resources whose pending tag names its cluster and, when
// Namespaces are set (the agent's --namespace), one of them.
type Scope struct {
	// Cluster is this Kubernetes cluster's id (the kube-system namespace's uid).
	Cluster string
	// Namespaces limit the sweep to members of these namespaces; none means all.
	Namespaces []string
}

// holds says whether the scope covers namespace ns.
func (s Scope) holds(ns string) bool {
	return len(s.Namespaces) == 0 || slices.Contains(s.Namespaces, ns)
}

// Observed is everything a sweep decides on. The cloud listings come first and the
// Kubernetes ones after them, so a resource listed was created before the members were
// listed: its member, which exists before any step creates something for it, is in the list
// unless it is gone.
type Observed struct {
	Scope Scope
	// Snapshots carry meta.TagBackupPending, Volumes meta.TagRestorePending (as listed).
	Snapshots []cloud.Snapshot
	Volumes   []cloud.Volume
	// BackupMembers and RestoreMembers are the uids of the members that exist in scope,
	// those being deleted included.
	BackupMembers  map[string]bool
	RestoreMembers map[string]bool
	// Referenced maps the snapshots an existing VolumeBackupMember's snapshot result records
	// to that member (namespace/name). ReferencesUnknown says some member's result could not
	// be read: then no snapshot is deleted.
	Referenced        map[string]string
	ReferencesUnknown string
	// Bound maps the EBS volumes a PersistentVolume names to that PV.
	Bound map[string]string
	Now   time.Time
	// Grace is the age a resource must reach before it is deleted.
	Grace time.Duration
}

// Orphan is a resource to delete: it was never recorded by its step, and its member is gone.
type Orphan struct {
	// Kind is metrics.OrphanSnapshot or metrics.OrphanVolume.
	Kind string
	ID   string
	// Owner is the backup or restore id (the member's uid) it is tagged with; Namespace the
	// member's namespace.
	Owner     string
	Namespace string
	Age       time.Duration
}

// Why says why the orphan is deleted, for its Event and log line.
func (o Orphan) Why() string {
	member, tag := "VolumeBackupMember", meta.TagBackup
	if o.Kind == metrics.OrphanVolume {
		member, tag = "VolumeRestoreMember", meta.TagRestore
	}
	return fmt.Sprintf("its %s (%s=%s, namespace %s) no longer exists and it was never recorded (age %s)",
		member, tag, o.Owner, o.Namespace, o.Age.Round(time.Second))
}

// Kept is a listed resource the sweep leaves alone, and why.
type Kept struct {
	Kind   string
	ID     string
	Reason string
}

// Plan is what a sweep does.
type Plan struct {
	Delete []Orphan
	Keep   []Kept
}

// Decide picks the orphans among the listed resources. A resource is deleted only when every
// one of these holds; anything it cannot tell keeps it:
//   - its pending tag names this scope's cluster (and namespace, when scoped);
//   - it carries a valid backup (snapshot) or restore (volume) identity;
//   - no member with that uid exists in scope;
//   - a snapshot: no existing backup member's result records it, and every result could be
//     read; a volume: no PersistentVolume names it, and it is available and attached nowhere;
//   - its start (snapshot) or creation (volume) time is known and at least Grace ago.
func Decide(o Observed) Plan {
	var p Plan
	for _, s := range o.Snapshots {
		c := candidate{kind: metrics.OrphanSnapshot, id: s.ID, tags: s.Tags, pendingKey: meta.TagBackupPending, idKey: meta.TagBackup, born: s.Started}
		orphan, why := c.decide(o, o.BackupMembers, func() string {
			if m, ok := o.Referenced[s.ID]; ok {
				return "recorded by VolumeBackupMember " + m
			}
			if o.ReferencesUnknown != "" {
				return "the snapshots " + o.ReferencesUnknown + " records are unknown"
			}
			return ""
		})
		p.add(orphan, why)
	}
	for _, v := range o.Volumes {
		c := candidate{kind: metrics.OrphanVolume, id: v.ID, tags: v.Tags, pendingKey: meta.TagRestorePending, idKey: meta.TagRestore, born: v.Created}
		orphan, why := c.decide(o, o.RestoreMembers, func() string {
			if pv, ok := o.Bound[v.ID]; ok {
				return "PersistentVolume " + pv + " names it"
			}
			if v.State != cloud.VolumeAvailable || len(v.Attachments) > 0 {
				return fmt.Sprintf("it is %s with %d attachments, not available", v.State, len(v.Attachments))
			}
			return ""
		})
		p.add(orphan, why)
	}
	slices.SortFunc(p.Delete, func(a, b Orphan) int { return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.ID, b.ID)) })
	slices.SortFunc(p.Keep, func(a, b Kept) int { return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.ID, b.ID)) })
	return p
}

func (p *Plan) add(o *Orphan, why Kept) {
	if o != nil {
		p.Delete = append(p.Delete, *o)
		return
	}
	p.Keep = append(p.Keep, why)
}

// candidate is a listed resource in the terms Decide needs.
type candidate struct {
	kind, id          string
	tags              map[string]string
	pendingKey, idKey string
	born              time.Time
}

// decide returns the orphan, or why the resource is kept. inUse names what still uses it
// ("" for nothing).
func (c candidate) decide(o Observed, members map[string]bool, inUse func() string) (*Orphan, Kept) {
	keep := func(format string, args ...any) (*Orphan, Kept) {
		return nil, Kept{Kind: c.kind, ID: c.id, Reason: fmt.Sprintf(format, args...)}
	}
	v, ok := c.tags[c.pendingKey]
	if !ok {
		return keep("not tagged %s", c.pendingKey)
	}
	owner, err := meta.ParseOwner(v)
	switch {
	case err != nil:
		return keep("tag %s: %v", c.pendingKey, err)
	case owner.Cluster != o.Scope.Cluster:
		return keep("made for another Kubernetes cluster (%s)", owner.Cluster)
	case !o.Scope.holds(owner.Namespace):
		return keep("made for namespace %s, outside this agent's %s", owner.Namespace, strings.Join(o.Scope.Namespaces, ", "))
	}
	id := c.tags[c.idKey]
	if err := meta.ValidateID(id); err != nil {
		return keep("tag %s: %v", c.idKey, err)
	}
	if members[id] {
		return keep("its member (uid %s) exists", id)
	}
	if why := inUse(); why != "" {
		return keep("%s", why)
	}
	if c.born.IsZero() {
		return keep("its creation time is unknown")
	}
	age := o.Now.Sub(c.born)
	if age < o.Grace {
		return keep("%s old, younger than the grace period %s", age.Round(time.Second), o.Grace)
	}
	return &Orphan{Kind: c.kind, ID: c.id, Owner: id, Namespace: owner.Namespace, Age: age}, Kept{}
}
