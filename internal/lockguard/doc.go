// Package lockguard tells whether initlock's lock guard is in force in a
// cluster: the ValidatingAdmissionPolicy of config/protection that refuses
// deletes of held init locks, and its binding. It is the one check: the
// manager runs it at start and periodically (its gauge
// initlock_lock_guard_installed and its LockGuardNotInForce event), and
// kubectl initlock runs it once per list and repair (a held lock's
// protection, guarded or not).
//
// # What it guarantees
//
//   - Check reads the policy and the binding of one name (DefaultName as
//     installed), one GET each through the reader it is given, and writes
//     nothing.
//   - In force means, as Judge states it: both exist and are not being
//     deleted; the policy's spec equals, in every field that decides a
//     request, the spec of config/protection/lock-guard.yaml as embedded
//     in the binary (config/protection, read by Shipped), compared as
//     decoded objects once the API server's defaults are set on both
//     sides; the binding binds that policy with Deny among its actions,
//     and its matchResources takes no request away from the policy (no
//     selector that selects less than everything, no resource rules
//     narrower than the policy's, no exclusion of what the policy
//     matches). The comparison follows the file: a change of the shipped
//     policy needs no change here.
//   - Not in force is an error wrapping ErrNotInForce whose message names
//     the object at fault and the fix, e.g. "ValidatingAdmissionPolicyBinding
//     initlock-lock-guard is missing: apply config/protection from the
//     release". Any other error means that whether it is in force is not
//     known (the reader may not read admission policies, the API server
//     failed): it is never reported as in force.
//
// # Limits
//
//   - It judges the installed objects, not the API server's enforcement of
//     them: a policy just created is enforced a moment later (the API
//     server loads policies from its informer), and a policy whose
//     expressions do not compile on the API server is not in force though
//     its spec is the shipped one. The shipped policy compiles on the
//     Kubernetes versions docs/install.md names.
//   - It looks at the binding of the policy's own name only: another
//     binding of the same policy neither makes it in force nor takes it
//     away. A binding whose selectors carry labels or expressions is
//     judged to narrow it even when every namespace or object in the
//     cluster happens to match them: what is labelled changes.
//   - It is a point in time: the guard may be deleted the moment after.
//     It decides nothing about a lock; the lock guard is what refuses a
//     delete, and initlock's releases do not depend on it.
package lockguard
