// Package library tests pkg/initlock on the real API server: Lock and
// Unlock with exact request counts, restores, and its benchmarks. These
// tests live outside the library's directory so that the library's own
// tests need nothing but the library and its small dependency graph.
package library
