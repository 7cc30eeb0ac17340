// Package wire reads and writes initlock's objects as docs/design.md
// (section 1) documents them, for the project's tests, benchmarks, demo
// and chaos runs: the lock's name, label and data key, the record it
// holds, the Cluster's grant register, and the marks initlock puts on a
// lock.
//
// It shares no code with the library: a test that checks the library's
// objects through wire checks, too, that the library keeps to the
// documented format, which upstream providers and older initlock
// releases read. It decodes leniently, as those readers do (unknown
// fields are ignored), and never validates what it writes.
package wire
