// Package protocol proves, on the TiDB double, that fedbr's BR engine restores exactly the
// transactions committed at or below the backup ts: `br pause` holds the cluster while each
// store's volume is captured at its own instant, and `br restore-data` recovers and flashes the
// restored stores back. A negative control shows the checker catches the same capture taken
// without the pause.
package protocol
