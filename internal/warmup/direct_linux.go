package warmup

import "syscall"

// oDirect is the open flag that bypasses the page cache.
const oDirect = syscall.O_DIRECT
