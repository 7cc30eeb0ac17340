// Package engine is the protocol behind package initlock, the restore-safe
// control-plane init lock for Cluster API bootstrap providers: the wire
// format, the reader, the decision, the writes and their preconditions.
// Package initlock's Locker is a thin layer over Env; package keeper, which
// initlock-manager and kubectl-initlock use, reads, decides, confirms and
// applies through Read, Decide, Keep and Env.Unlock, and tells a person why
// with Explain.
//
// It is internal to the library module: providers use package initlock,
// keepers package keeper. Its names change with the protocol.
//
// # The wire contract
//
//   - The lock is a ConfigMap named "<cluster-name>-lock" in the Cluster's
//     namespace (LockName).
//   - It carries the label "cluster.x-k8s.io/cluster-name: <cluster-name>"
//     (ClusterNameLabel).
//   - Its data key "lock-information" (DataKey) holds the JSON Record
//     {"machineName":"<machine>"}. initlock adds "machineUID", "clusterUID",
//     "token", "acquiredAt" and "handedOverBy"; upstream decoders ignore
//     unknown fields, and initlock ignores fields it does not know.
//   - It has one ownerReference to the Cluster: apiVersion
//     "cluster.x-k8s.io/<version>", kind "Cluster", name and uid, with neither
//     controller nor blockOwnerDeletion set. Other ownerReferences a user or
//     tool added are kept.
//
// A ConfigMap with the lock's name but without the label (for this cluster)
// or the data key is not a lock (initlock.ErrNotALock) and is never modified or
// deleted. A lock whose record is not JSON or names no machine (no name, or
// one no Machine can have) is corrupt (initlock.ErrCorruptLock) and is never
// taken over silently.
//
// # Two protections
//
// The ConfigMap alone cannot keep the lock safe: a restore that keeps a stale
// owner UID lets the garbage collector delete it within milliseconds, and an
// operator may delete it by hand. So every acquisition is also recorded in
// the Cluster, in the annotation GrantAnnotation
// ("initlock.dev/init-lock-grant"): the grant register. Backup, restore and
// move carry it with the Cluster. The lock is free only when neither
// protection holds it: the ConfigMap names no existing Machine other than
// the caller, and the register names no existing Machine other than the
// caller. Losing one of the two (the ConfigMap deleted; the Cluster restored
// from an older backup, or its annotation edited away) never lets a second
// Machine in. A grant counts while the Machine it names exists and the
// control plane is not initialised; after init the ConfigMap alone decides,
// as upstream, and the register is left as it is.
//
// Identity is by UID. A record and a grant name their Machine by name, and,
// while the Cluster keeps the UID they were written under, by the Machine's
// UID too (Ref.Names); after a restore or a move (new UIDs) they name it by
// name, and then only by the live incarnation of that Machine, never by an
// object carrying an earlier UID. Lock and Unlock read the caller's Machine
// live and refuse a Machine object whose UID is not the live one's
// (initlock.ErrStaleMachine): a stale object of a Machine deleted and created again,
// or restored, is never granted the lock and never releases it. The read
// that confirms the caller comes after the read of the Cluster it is
// decided against (Unlock reads the lock and the Cluster, then the
// Machine; Lock reads the Machine again with its claim), so that a restore
// between two requests shows the caller's object as stale, and a restore
// after them makes every write fail its preconditions. Unlock also refuses
// a Cluster object that is not the live Cluster (initlock.ErrStaleCluster).
//
// # Tokens and preconditions
//
// Each acquisition writes a fresh random token into both the register and
// the lock. A caller holds the lock without writing only when both name it
// exactly (Ref.Exact: both UIDs) with the same token. Every write carries a
// precondition, so that a write the API server applies late, after its
// client gave up, or applies twice, is refused or changes nothing:
//
//	write                         precondition (failure: nothing written)
//	claim, retire, withdraw       JSON patch: test the Cluster's UID, that it is
//	  (the register)              not paused (annotation and spec.paused), and
//	                              the register's exact value read (its token)
//	create the lock               create-if-absent (409 when it exists)
//	rewrite or adopt the lock     resourceVersion read (409 on any change)
//	delete the lock               the release mark, with the resourceVersion read;
//	                              then the delete, with the UID and the
//	                              resourceVersion the mark left
//
// Every delete of a lock is two writes: the release mark (ReleaseAnnotation,
// the lock's own UID), then the delete. initlock's admission policy
// (config/protection, initlock-lock-guard) refuses every other delete of a
// lock, whoever makes it: the garbage collector, a person, a bootstrap
// provider's own release; so a lock is held from the instant it exists,
// whoever wrote it, and is in every backup. A rewrite of the lock for
// another holder and an adoption take the mark off. A lock being deleted
// nonetheless (another controller's finalizer holds it, or the policy is
// not installed) counts as held by the Machine its record names until it
// is gone: it is never taken over, adopted or handed on.
//
// No write races the pause test: the lock is written only once the claim
// that tests the pause is written, never in parallel with it, and Lock
// never deletes a lock; a Lock whose view is unpaused while the Cluster is
// paused live writes nothing.
//
// A grant is withdrawn by the call that claimed it only when no lock write
// of that call may still land (Observation.Uncertain); otherwise it stays,
// naming the caller, and is released by the caller's Unlock or ends with
// its Machine. A refused call whose claim's answer was lost, and that does
// not see the claim in the register, fences the register (a release
// written against the value read), so that the claim, applied late, fails.
// Unlock first retires the grant (a new token for the same Machine, so
// that no earlier acquisition is relied on while the release is under
// way), then withdraws it, then deletes the lock.
//
// # What backs each "Acquired: true"
//
//	path                            the server-side facts
//	free Lock (PATCH ∥ GET, CREATE) the register was empty and the Cluster unpaused
//	                                with the UID read (the claim's tests), the
//	                                caller's Machine is live with its UID (GET),
//	                                then the lock did not exist (create)
//	healthy re-Lock (3 GETs)        live reads of the lock, the Cluster and the
//	                                Machine show both protections naming the caller
//	                                exactly, with one token
//	claim, then write (settle)      the claim's tests against the value read live,
//	                                the caller's Machine read after that Cluster,
//	                                then the lock's create or resourceVersion, with
//	                                the claim's fresh token
//
// No answer relies on the Cluster or Machine objects the caller passes,
// which may come from a lagging informer cache: they only choose the first
// requests. The lock reconciler of the manager decides from its cache but
// confirms every write against the API server (Confirm) first, and adopts
// and deletes only against a Cluster UID read live.
//
// Requests per path, as test/library asserts them (reads are GETs; writes
// are creates, patches and deletes, a failed one included):
//
//	path                                              reads  writes
//	free Lock                                         1      2 (claim, then create)
//	healthy re-Lock by the holder                     3      0
//	re-adoption (owner reference stripped)            3      1
//	the holder after a restore                        4      2 (claim, then rewrite)
//	held by another Machine with a grant              4      0
//	lost the race for a free lock (claim refused)     1      1
//	held by an upstream lock, caller refused          5      3 (claim withdrawn)
//	take-over from a Machine that is gone             5      3
//	Unlock                                            3      4 (retire, withdraw, mark, delete)
//
// # What it does not guarantee
//
//   - Safety is proved by internal/explore for the real Lock, Unlock and the
//     manager's lock reconciler against a model API server, exhaustively up
//     to bounds: two or three Machines, one or two attempts each, up to two
//     faulty writes (applied late, failed, answer lost, refused), up to
//     three adversary events (a backup and a restore of the namespace among
//     them) with at most one protection lost, caches one to three versions
//     behind. docs/design.md lists the scenarios, the states
//     explored and the bound. Beyond the bounds it is argued, not proved.
//   - Losing both protections at once (the ConfigMap deleted and the
//     Cluster restored from a backup older than the grant) leaves nothing
//     that remembers the grant: a second Machine may then be granted the
//     lock, as upstream after the ConfigMap alone is lost.
//   - A grant counts only while a Machine of its name (and, before a
//     restore or move, of its UID) exists and the Cluster is not
//     initialised. Deleting the holder Machine, or an explicit Unlock, ends
//     it; that is how a provider lets another Machine try after a failed
//     init. A Machine deleted during its own Lock call (even if created
//     again under its name) may be told Acquired for the deleted
//     incarnation, as it may be by a call that returned a moment before
//     the delete: that grant counts for nothing, and another Machine may
//     hold the lock meanwhile. A provider must not write bootstrap data
//     for a Machine whose UID is gone.
//   - Bootstrap providers that do not use this package (the upstream lock)
//     write no grants: their locks are protected only by the ConfigMap, and
//     a caller of this package never takes them while their holder exists.
//   - A register holding something else than a grant record refuses every
//     caller (initlock.ErrCorruptLock) until an operator releases it.
//   - While a Cluster is paused, Lock writes nothing to it or its lock and
//     returns initlock.ErrClusterPaused (or, when the caller's view of it was
//     unpaused, refuses the caller at once, its claim having failed the
//     pause test; the next call returns the error): objects arrive in any
//     order during restore and move.
//   - A caller whose claim of a free lock loses the race is refused at once
//     without reading who won: Outcome.Holder is empty. A pause that lands after a claim was written, before the
//     lock's write, does not stop that write (as a controller's reconcile
//     in flight finishes); the call then holds the lock.
//   - A caller whose claim's outcome is unknown, and whose lock write may
//     still land, keeps its grant when refused; it ends with the caller's
//     Unlock or its Machine, and blocks others until then.
//   - Lock and Unlock write the register and the resourceVersion the server
//     returned into the Cluster object passed, when that object was
//     current; concurrent calls must not share one object. A provider needs
//     permission to get and patch Clusters and to get Machines.
//
// # Read, decide, then do
//
// Read is the one reader: it gathers an Observation (the lock, the Cluster
// and its grant register, the Machines they name and the caller) from a
// cache or from the API server. Decide is the one decision: from an
// Observation, a Policy and the time it returns a Decision (the verdict,
// the action, the register operation, the reason and time to wait, and
// whether an operator's release needs --force). Env's Lock and Unlock use
// them for callers; the manager and the kubectl plugin use them, with
// Confirm and Apply, to keep locks owned, release them after init and
// collect orphans.
//
// # Reading order
//
// The package reads from its entry points down: Env's Lock and Unlock
// (package initlock's Locker), then Keep, Confirm and Apply (package
// keeper's), then Decide and Explain, then what they share. A function uses
// only functions defined below it, later in its own file or in a file
// listed after its own, and none is longer than 80 lines; one Lock reads
// top to bottom in lock.go and lock_writes.go, one release in unlock.go and
// unlock_writes.go. TestReadingOrder checks the order against this list:
//
//	env.go            Env: the clients, the clock and the tokens of Lock and Unlock
//	lock.go           Lock: the free path, then the rounds of read, decide, write
//	lock_writes.go    a Lock's writes (claim, lock, refusal) and its outcome
//	unlock.go         Unlock and UnlockParams: the rounds of a release and its refusals
//	unlock_writes.go  a release's writes (register, lock) and an operator's Force
//	adopt.go          Adopt: a provider's adoption, the keepers' decision and write
//	keep.go           Keep, Confirm and Apply: the keepers' writes
//	decide.go         Decide, the one decision
//	decide_lock.go    the decision for Lock
//	decide_unlock.go  the decision for Unlock and an operator's release
//	decide_keep.go    the decision for the keepers
//	explain.go        Explain: a decision in words for a person
//	writes.go         the writes of a lock and of the grant register
//	release.go        a lock's release: the release mark, then the delete
//	sync.go           the caller's Cluster object kept in step with the register
//	read.go           Read, the one reader
//	report.go         the errors and events the calls report, and what a failed request means
//	predicates.go     what the register and the lock say to a decision
//	decision.go       what Decide reads and returns: Observation, Policy, Decision
//	objects.go        the Cluster, the Machine and the Lock as the lock sees them
//	record.go         the lock's name and record: the wire format
//	grant.go          the grant register's value and its compare-and-swap
package engine
