// Package security holds the proof of fedbr's multi-tenancy boundary (issue #21): a table of
// hostile or careless VolumeBackups, VolumeRestores, schedules and members, each with what it
// gets — refused at admission by a CEL rule (its message), refused by the agent's policy (the
// rule's name, on the member's Failed condition, in an Event and on the owner's Failed
// condition, with no Job created), or let through where the operator's policy allows it.
//
// Everything runs for real on one envtest API server with fedbr's CRDs: it is the control
// plane and the data plane "dp1" at once, with the manager (internal/manager) and the agent's
// two member controllers running against it under the policy the agent's flags would give.
// docs/security.md summarises the table.
package security
