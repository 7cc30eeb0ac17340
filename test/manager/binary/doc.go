// Package binary runs the initlock-manager binary (cmd/initlock-manager),
// built as a release builds it, as a process against a real API server with
// a kubeconfig and the flags of config/: it becomes ready, elects itself,
// heals a lock, relinks a restored Secret, serves its metrics and stops on
// SIGTERM. It holds tests only; the command line's checks, which need no
// API server, are cmd/initlock-manager's tests.
package binary
