// Package benchreport runs initlock's benchmarks in one go and turns their
// results into a report: a results file in the Go benchmark format (what
// benchstat reads), a Markdown summary in which each figure stands next to
// its raw-client floor and the ratio of the two, and PNG plots drawn with
// gonum.org/v1/plot: the restore storm's heal time against the number of
// clusters, and the manager's heap against the number of unrelated
// ConfigMaps.
//
// Plan lists the go test invocations: the library's FreeLock, ReLock and
// LockGuard (what the lock guard adds to a ConfigMap's create and delete), the
// manager's RestoreStorm once per cluster count (the count goes into the
// benchmark's name, "RestoreStorm/clusters=250", so that benchstat keeps the
// sizes apart), RestoreWhileRunning, SteadyState and
// MemoryUnrelatedConfigMaps once per ConfigMap count, and every benchmark of
// any other package that has some (the relinker's, when it has them).
//
// It guarantees that the results file holds only the lines go test printed
// for benchmarks and their configuration (goos, goarch, pkg, cpu), with the
// names extended as said, so that benchstat compares two runs. It does not
// judge whether a figure is good beyond the targets written next to the
// known benchmarks, and it does not control what else runs on the machine:
// the report says on which machine and when it ran.
package benchreport
