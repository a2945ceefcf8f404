// Package operator is the lab's stand-in tidb-operator: a controller for pingcap.com/v1alpha1
// TidbCluster that runs the PD and TiKV doubles (`fedbr-lab lab pd|tikv`) as pods on PVCs, publishes
// their addresses in the TidbCluster status where tidb-operator does, and honours
// spec.recoveryMode and the tidb.pingcap.com/tikv-volumes-ready annotation the way
// tidb-operator's TiKV member manager does during a volume-snapshot restore.
//
// # Structure
//
// Each reconcile observes (TidbCluster, its pods, PVCs and Service, PD's health and store list
// through the real PD HTTP client), calls the pure Plan, and applies the returned actions
// idempotently; the next reconcile observes what they did.
//
// # Pods, not StatefulSets
//
// Members are bare pods named <tc>-pd-<i> and <tc>-tikv-<i> (tidb-operator v2 does the same),
// because every member needs its own arguments (store id, listen address) and the lab's process
// nodes share the host network, so an ordinal-dependent address cannot come from one template.
// PVCs keep the StatefulSet names (<component>-<tc>-<component>-<i>, e.g. tikv-basic-tikv-0), so
// the restore's PV/PVC rebuild finds them, and carry no owner reference: like a StatefulSet's
// claims they outlive the TidbCluster.
//
// # Addresses
//
// Pods share the host network, so every member gets an address of its own, fixed by the
// operator's Addressing (see Addressing.PD and Addressing.TiKV): either its own loopback IP
// with the real fixed ports (IPPrefix "127.0.N": PD i on 127.0.N.(10+i):2379, TiKV i on
// 127.0.N.(100+i):20160), or 127.0.0.1 with a port block (BasePort: PD i on BasePort+i,
// TiKV i on BasePort+100+i). Run one operator per lab cluster with a distinct prefix or port
// block; fedbr reads the addresses from the TidbCluster status.
package operator
