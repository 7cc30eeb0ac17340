// Package explore checks the init lock's protocol exhaustively: it runs the
// real code (initlock.Locker's Lock and Unlock, and the manager's lock
// reconciler) against the model API server of internal/kubeenv/apimodel,
// and explores every interleaving of their requests, every fault and every
// adversary event up to a scenario's bounds, checking the invariants in
// every state.
//
// # How it works
//
// Every request the code makes is a scheduling point: it blocks in the
// model's Gate until the explorer picks it, with an outcome. The code runs
// inside a testing/synctest bubble, so that synctest.Wait tells when every
// goroutine is blocked and each step is one choice. An execution is the
// sequence of choices; the explorer replays prefixes and takes each new
// choice in turn, depth first, and prunes a state already expanded at a
// depth no greater (the state's digest covers the store, what is pending
// and held back, what each actor was told, the budgets, the caches' floors
// and the checker's state). The first violation bounds the rest of the
// search to shorter ones, so the counterexample reported is a shortest one.
//
// The choices follow. Each that injects a fault (a request not served as
// asked, a cache read older than the live version, an event, an init that
// fails or is redone) is of a class of the one catalogue,
// internal/kubeenv/faults, which names it as chaos (internal/chaos) does.
// The tables beside the choices map them (outcomeClasses, eventClasses,
// staleReadClass, wayClasses); TestFaultCatalogue checks the mapping
// against the catalogue, and TestExplore that the scenarios of Scenarios
// exercise every class the explorer models, as Result.Faults counts them.
//
//   - Requests: served now; or, for a write, met by one of the request
//     faults the scenario allows (Scenario.FaultKinds). A write held back
//     is applied at any later step or never.
//   - Cache reads: the providers call Lock with the Cluster and Machine
//     their informer shows, and the manager decides from its cache: any
//     version not older than what the actor saw last, a bounded number of
//     versions back.
//   - Adversary events (EventKind): what happens to the objects from
//     outside the code under test, at any step. A backup may capture a
//     call half done (but no object being deleted, which Velero skips) and
//     be restored at any later step as Velero restores it (velerosim: new
//     UIDs, no ownerReferences or status, Velero's order), so that a
//     call's requests fall on both sides of it and callers hold objects of
//     an earlier incarnation.
//   - The actors' own choices: a provider's init failing (it then calls
//     Unlock and tries again), its reconcile ending before the data is
//     written (it calls Lock again), or going on.
//   - Actors: providers using initlock's Locker (Provider.AnyHolder: its
//     Unlock that of the drop-in mutex); providers running CABPK v1.14's
//     own mutex (Provider.Upstream: create, read the holder on a taken
//     name, delete without preconditions); the manager's lock reconciler;
//     an operator's kubectl initlock release without --force
//     (Scenario.Operator); the relinker (internal/relink) reconciling a
//     ConfigMap a restore brought back, whose recorded owners an event may
//     delete (Scenario.Relink). Scenario.Guard installs the lock guard in the model API
//     server: the shipped admission policy (config/protection), evaluated
//     by kube-apiserver's own policy code (apimodel.Guard), refusing every
//     delete of a lock not marked for release, the adversary's included.
//
// # Reductions
//
// Each is sound: no violation reachable within a scenario's bounds is
// missed, and the shortest one is still found (Scenario.Off turns the last
// two off; reduce_test.go checks them against the search without).
//
//   - Eager local choices (a persistent set): a cache read and an actor's
//     own choice are taken as soon as they are reached. They change nothing
//     others see, and the actor reaches them right after a point the
//     explorer may delay at will (a wait, or the answer to one of its
//     requests): a path that puts other steps between that point and the
//     choice is a path that delays the point instead, up to a cache read
//     showing as stale a version that was live when taken at once (which
//     only spends less of the stale-read budget).
//   - Late writes stand in for failed ones (never applied) and lost answers
//     (applied at the next step).
//   - Sleep sets (Godefroid), with the state cache. Every choice has a
//     label (its text with revisions by rank) and a footprint: the
//     resources it reads and writes (the lock, the Cluster, its status,
//     each Machine, the fault, event and stale-read budgets, the writes
//     held back, the checker's grants, each actor's own state), with what
//     the actor it releases does before it blocks again (the checker's
//     hooks, its end) noted as it runs (footprint.go). Two choices whose
//     footprints do not conflict commute: either order leads to one state,
//     each keeps the other enabled, and the checker judges each alike, so
//     an interleaving and its reordering reach the same states at the same
//     depths. A choice explored from a state sleeps in the states its later
//     siblings lead to for as long as the steps taken are independent of
//     it: what it would lead to there was reached through it already.
//     Sleep sets alone skip no state, only steps (executions), and keep
//     every state's shortest depth. With the cache, a state records the
//     smallest step each choice was explored from it at; a state reached
//     again explores what it has not explored at that step or before and
//     is not asleep, and wakes up what it explored before (Godefroid's
//     intersection of sleep sets). The deep runs set Scenario.AnyDepth:
//     the cache then ignores the step, which is sound once no execution
//     was cut at the step bound (every subtree cached was explored to its
//     end), and the run proves nothing otherwise, which it reports. Conservative where unsure: a wait reads
//     every object (the actor then reads its cache), an event touches what
//     eventFootprints declares and everything when it declares nothing,
//     faults share the fault budget, a late write the list of held-back
//     writes, and all the steps of one actor depend on each other. The
//     eager choices above are persistent sets; sleep sets over persistent
//     sets is Godefroid's combination, sound here because a sleeping
//     choice is carried through the eager ones (and dropped by any that
//     conflicts with it) and the eager ones never sleep.
//   - Symmetry: Machines whose providers have one script (Attempts, Unlock,
//     ViewDepth, Incarnation), one provider each, named by no fault
//     pattern and not the upstream holder, are interchangeable: renaming
//     them in every text of a state (keys, UIDs, tokens, actors, JSON) maps
//     each execution to one of the renamed scenario, which is the scenario
//     itself; the code under test never orders Machines by name. The digest
//     is the smallest over the renamings, so a state is expanded once per
//     orbit, and labels are renamed as the digest names them, so a choice
//     explored from one state of an orbit counts for the others. Violations
//     map to violations of the same invariant and length.
//
// The state digest is a 16-byte key: SHA-256 over the state's texts (every
// revision by its rank, sets of lines sorted after renaming).
//
// # The invariants
//
//   - One holder: at most one Machine is granted the lock while it exists,
//     the control plane is not initialised, and it has not called Unlock
//     since its grant.
//   - Defence in depth: while a Machine holds a grant, the register and the
//     lock both name it, but for what the adversary's losses took: nothing
//     else (a late or replayed write, another actor) takes a protection
//     away. With one loss, one protection is left, so no second Machine
//     gets in.
//   - Live caller: the lock is granted only to a Machine that was live
//     during the call, never to a deleted one's stale object.
//   - No unsafe delete: the manager never deletes the lock while a Machine
//     holds a grant; live owner: it points the lock only at a Cluster UID
//     that was live while it reconciled.
//   - Not paused: nothing is written to a paused Cluster, and the manager
//     writes no lock of a Cluster that is paused and that it read paused
//     (from its cache or live) in that reconcile. Only locks: no
//     Machine is written, and of a Cluster nothing but its grant register.
//   - Pause test: no write races the pause test: a write of the lock is
//     never in flight together with a write of the register by one actor.
//   - Keep held: a Lock call never deletes a lock that existed before it
//     began, even by a write applied after the call gave up.
//   - Stale leftover: a call refused as stale leaves no grant or lock of
//     its own naming the stale object's UID.
//   - Stale release: no write of an Unlock lands once its Machine object
//     is stale (the Machine restored or created again since), so a
//     restored holder keeps both protections.
//   - Held lock: with the lock guard installed, nothing removes a lock,
//     from the instant it exists, while the Machine it names exists and
//     has not released it and the Cluster is not initialised. The one
//     window docs/design.md accepts is not counted: a Machine back
//     (machine-back) that a releaser has not seen since, while that
//     releaser deletes the lock or runs with its release mark on it. A
//     mark left once its release has returned is counted.
//   - Relink confirmed: the relinker writes an owner's UID only as its last
//     live read of that owner found it, and sends no request between that
//     read's answer and the patch: the window internal/relink states, with
//     no time passing (no answer is ConfirmFor old, no owner read again).
//     An owner deleted in it is written: the window stated.
//   - Liveness: once every actor is done, with no holder and the control
//     plane not initialised, some Machine asking again (probe, no fault)
//     is granted the lock, unless only an operator can resolve the state
//     (a corrupt lock or register, a ConfigMap in the way, or a conflict
//     a restore brought back: counted in Result.OperatorNeeded).
//
// The checker reads the objects as docs/design.md documents them
// (internal/kubeenv/wire), not through the engine's own reading, so that a
// fault in how the engine reads a lock, a register or a mark is caught
// rather than shared.
//
// Across a restore, a Machine restored is the Machine it restores (its
// grant goes on under the new UID); a protection the backup did not hold
// is lost, and a grant that lost both is no longer checked, the limit
// pkg/initlock documents.
//
// mutations_test.go re-introduces, in a copy of the source, each rule the
// protocol rests on; the scenario named for it must find a counterexample.
//
// # What it does not guarantee
//
//   - It proves the invariants only up to each scenario's bounds: two or
//     three Machines, a few attempts each, a few faults and events, a step
//     bound, cache reads a few versions back. Scenarios lists them; the
//     deep target (make explore) runs larger ones.
//   - It checks the code against the model, not the API server: the model's
//     fidelity rests on apimodel's conformance test.
//   - Time does not pass: waits are points the explorer may delay, and the
//     orphan grace period never elapses.
//   - It needs every goroutine of the code under test to block on the model
//     or in synctest-aware primitives (channels, sync.WaitGroup); a mutex held
//     across a request would hide a step.
package explore
