package demo

// Layout is the picture of what the demo runs, as on EKS: the parts and where they run, then
// the sequence of a backup and of a restore. The demo prints it first; docs/federation.md
// carries it verbatim (a test holds them together).
const Layout = `                      control cluster
  you ──▶ VolumeBackup, VolumeBackupSchedule, VolumeRestore
                              │
                        fedbr manager ── one member per data plane, the go-signals
          ┌───────────────────┼────────────────────┐          (spec), their reports (status)
          ▼                   ▼                    ▼
   data plane dp1       data plane dp2       data plane dp3    (an EKS cluster per AZ)
   fedbr agent          fedbr agent          fedbr agent       member ──▶ step Jobs
   TidbCluster:         TidbCluster:         TidbCluster:
   PD + TiKV            TiKV                 TiKV              one TiDB cluster over all three
   EBS volumes (AZ a)   EBS volumes (AZ b)   EBS volumes (AZ c)
          └─────────── EBS snapshots; backup metadata in S3 ───────────┘

backup   1 agents arm their snapshot Jobs (pods started, waiting for the go)
         2 one plane pauses: GC safe point, PD schedulers, TiKV leases held at one backup ts
         3 every plane: CreateSnapshots of its TiKV volumes at once, metadata to S3
         4 every snapshot started: the pause is lifted (the window is about a second)
         5 the snapshots complete in AWS: the backup is Complete at its commit ts
restore  1 every plane: volumes from its snapshots in its AZ, handed to TiKV (warm-up
           before it, sync, or beside it, async)
         2 TiKV starts in recovery mode; one plane's restore-data recovers every region
           and flashes the whole key space back to the commit ts
         3 recovery mode ends: the restored cluster holds exactly the data at the commit ts
`
