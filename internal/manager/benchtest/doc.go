// Package benchtest holds the benchmarks of the initlock manager on a real
// control plane: the restore storm against a raw patch loop, the writes per
// adopted lock, the requests of a steady period and the memory cost of
// unrelated ConfigMaps. The control plane starts only when benchmarks run
// (go test -bench), so a plain go test of this package does nothing.
//
// Flags (after -args): -storm.clusters, -storm.qps, -storm.burst,
// -steady.clusters, -steady.duration, -steady.sync-period,
// -memory.configmaps, -memory.clusters.
package benchtest
