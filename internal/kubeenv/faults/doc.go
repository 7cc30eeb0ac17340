// Package faults is the one catalogue of the fault classes initlock is
// tested against: what the real world does to the code (a response lost
// after the API server applied a write, a write applied after its client
// gave up, a stale cache read, an object deleted and created again under
// its name, a backup restored between two requests, a pause, the garbage
// collector, a killed process, ...).
//
// Both fault injectors map from it: the chaos runs on a real API server
// (internal/chaos) and the exhaustive explorer on the model API server
// (internal/explore). Each entry declares a class once: its name, which
// both sides use in their reports and scenario fields, a one-line meaning,
// and, for a side that does not model it, why not. A side declares a Map
// from the classes it models to the names of its own that inject them;
// Check fails on a class the side neither maps nor explains, and on one it
// maps although the catalogue says it cannot. Tally counts faults by class,
// and Missing names the classes a side models that a run never exercised.
//
// # Guarantees
//
//   - Every class has one name, unique, in lower-case words joined by
//     hyphens, a meaning, and at least one side that models it; the
//     catalogue's order (requests, caches, objects, processes, the guarded
//     work) is the order of every report.
//   - A side's tests fail (Check, Missing) as soon as a class is added that
//     it neither maps, exercises nor explains.
//
// # Limits
//
//   - It names and counts; it injects nothing. Each side's injection code
//     stays with the side, and so do the details a side reports beyond the
//     count (late writes applied or refused, what a re-created Machine
//     held).
//   - Two sides may model one class differently (chaos draws faults at
//     random on a real server, the explorer takes every one within its
//     bounds): the class says what happens, not how often or where.
//   - The shapes of the starting world (locks an upstream provider wrote,
//     ConfigMaps in the lock's place, annotated Clusters) and the actors'
//     scripts are not faults and are not listed.
package faults
