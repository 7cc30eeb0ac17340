// Package library tests pkg/initlock on the real API server: Lock and
// Unlock with exact request counts, restores, and its benchmarks; and the
// drop-in mutex of pkg/initlock/locking through the same Lock cases, its
// join-path Unlock, and the permissions of its RBAC markers (no more, no
// fewer). These tests live outside the library's module so that the
// library's own tests need nothing but the library and its small
// dependency graph.
package library
