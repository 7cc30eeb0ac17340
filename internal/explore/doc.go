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
// The choices:
//
//   - Requests: served now; or, for a write, held back and applied at any
//     later step or never (a write the API server applies after the client
//     gave up), failed without being applied (503), applied with its answer
//     lost, or refused (403: a missing permission, an admission webhook).
//   - Cache reads: the providers call Lock with the Cluster and Machine
//     their informer shows, and the manager decides from its cache: any
//     version not older than what the actor saw last, a bounded number of
//     versions back.
//   - Adversary events: the lock deleted (the garbage collector, a person),
//     the grant register reverted to an earlier value or removed (a Cluster
//     restored from an older backup, a PUT of an old copy), a Machine
//     deleted and created again under its name, pause and unpause, the
//     Cluster replaced by a new one of the same name, init completing.
//   - The actors' own choices: a provider's init failing (it then calls
//     Unlock and tries again) or going on.
//
// Two reductions keep it small, both sound: a cache read and an actor's own
// choice are taken as soon as they are reached (they change nothing others
// see, and the actor reaches them right after a point the explorer may
// delay at will); and a held-back write stands in for a failed one (never
// applied) and a lost answer (applied at the next step).
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
//   - Not paused: nothing is written to a paused Cluster. Only locks: no
//     Machine is written, and of a Cluster nothing but its grant register.
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
