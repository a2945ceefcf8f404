// Package chain proves the whole volume-snapshot backup and restore through fedbr's BR
// engines on the cloud path, with no Kubernetes: a TiDB double whose stores keep their data
// on AWS-double volumes runs the bank workload; `pause` holds it, `snapshot` takes real
// CreateSnapshots through the production provider while transfers go on, `restore-volumes`
// creates new volumes from the snapshots in another AZ, TiKV doubles start on them in
// recovery mode, `restore-data` flashes them back, and the bank checker finds exactly the
// transfers at or below the backup's resolved ts. The fault tests break one step each
// (stopping or killing the pause, a TiKV away during pause or restarting during
// restore-data, a throttling storm, a snapshot in the error state, a failed restore) and
// check what the issue promises: everything lifted or lapsed, success, or nothing left.
package chain
