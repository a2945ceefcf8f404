// Package protocol proves, on the TiDB double, that fedbr's BR engine restores exactly the
// transactions committed at or below the backup ts: `br pause` holds the cluster while each
// store's volume is captured at its own instant, and `br restore-data` recovers and flashes the
// restored stores back. Negative controls show the checker (or the restore itself) catches the
// same captures taken without the pause, with the backup ts read after the captures, and each
// safeguard of the engine removed by its test-only switch (docs/testing.md); under constant
// splits, merges and replica moves the pause is shown to freeze the topology.
package protocol
