// Package lab holds the lab's end-to-end test: the whole lab brought up with package env —
// four real Kubernetes clusters, the AWS double, process nodes and stand-in tidb-operators —
// runs what fedbr's production code relies on (Jobs with exit codes and logs, SIGTERM on
// delete, StatefulSets on AWS-double volumes, one TiDB cluster spread over three clusters
// under the bank workload), then installs fedbr with its charts and backs up and restores a TiDB
// cluster as a user would (the playground), in the same lab, and goes down without leaving a
// process.
package lab
