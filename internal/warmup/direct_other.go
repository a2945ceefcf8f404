//go:build !linux

package warmup

// oDirect is 0 where O_DIRECT does not exist: every read is buffered (and reported so).
const oDirect = 0
