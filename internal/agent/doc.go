// Package agent is fedbr's data-plane agent: the controllers that carry out one Kubernetes
// cluster's part of a federated backup or restore.
//
// The manager in the control plane creates a VolumeBackupMember or VolumeRestoreMember in
// every data plane and drives it by writing spec.phase. The agent observes the member, the
// TidbCluster, the TiKV pods and their volumes, the Jobs it started and what those Jobs report
// in the member's status.steps, asks a pure planner what to do, and applies the answer
// idempotently:
//
//   - package job builds the `fedbr br …` Jobs and reads the machine-readable status they
//     publish in the member's status.steps;
//   - package backupmember runs pause, snapshot and clean for a VolumeBackupMember;
//   - package restoremember runs restore-volumes, rebuilds the TiKV PVs/PVCs, starts TiKV
//     through the TidbCluster contract, runs restore-data and leaves recovery mode;
//   - package tidbcluster reads the tidb-operator contract (PD address, TiKV pods and stores,
//     EBS volume ids, instance ids);
//   - package policy is the operator's policy over what a member may make the agent run
//     (namespaces, images, service accounts, hostPath, credential variables, privilege): a
//     member outside it fails before any pod exists, and every Job's pod is judged again;
//   - package apply carries out actions idempotently, package condition sets conditions and
//     turns their transitions into Events;
//   - package sweeper deletes the snapshots and volumes the steps created but never recorded,
//     once the member they were made for is gone (the orphan sweeper);
//   - package metrics holds the agent's Prometheus metrics.
package agent
