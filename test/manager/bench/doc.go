// Package bench holds the benchmarks of the initlock manager on a real
// control plane: the restore storm against a raw patch loop (without a
// client rate limit by default, with the API server's own request count
// and each process's CPU time), the writes per adopted lock, the requests
// of a steady period, the memory cost of unrelated ConfigMaps, and the
// start-up over many Clusters against a bare controller-runtime manager.
// The control plane starts only when benchmarks run (go test -bench), so a
// plain go test of this package does nothing.
//
// Flags (after -args): -storm.clusters, -storm.qps (negative, the default:
// no client rate limit), -storm.burst, -steady.clusters, -steady.duration,
// -steady.sync-period, -memory.configmaps, -memory.clusters,
// -scale.clusters, -scale.machines.
package bench
