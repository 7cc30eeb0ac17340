package explore_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A mutation re-introduces the violation of one rule of the protocol into a
// copy of the source. The explorer must find a counterexample for each, in
// the scenario named: a rule no exploration checks is a rule nothing
// proves.
type mutation struct {
	name string
	// rule is what the mutation breaks.
	rule string
	// scenario must find a counterexample.
	scenario string
	edits    []edit
}

// edit replaces old, which must occur exactly once in file, by new.
type edit struct{ file, old, new string }

var mutations = []mutation{
	{name: "keeper-ignores-pause", scenario: "manager-paused",
		rule: "nothing reconciles a paused cluster: the keeper decides nothing while the Cluster is paused",
		edits: []edit{{"pkg/initlock/internal/engine/decide_keep.go",
			"\tif o.Cluster != nil && o.Cluster.Paused {\n",
			"\tif o.Cluster != nil && o.Cluster.Paused && false {\n"}}},
	{name: "relock-trusts-cached-register", scenario: "relock-after-unlock",
		rule: "no grant on a stale view: the holder's re-Lock reads the register live",
		edits: []edit{{"pkg/initlock/internal/engine/lock.go",
			"\ta := &acquisition{l: l, clusterObj: cluster, cl: cl, m: m, lockName: lockName, log: log}\n",
			"\tif cl.Grant.Held() && cl.Grant.Exact(&cl, &m) {\n" +
				"\t\tif cm, err := getConfigMap(ctx, l.Reader, cl.Namespace, lockName); err == nil && cm != nil {\n" +
				"\t\t\tif lk := ObserveLock(cm, cl.Name); lk.Problem == nil && lk.Record.Names(&cl, &m) {\n" +
				"\t\t\t\treturn Outcome{Acquired: true, Holder: m.Name, Verdict: VerdictHealthy, Action: ActionNone}, nil\n" +
				"\t\t\t}\n\t\t}\n\t}\n" +
				"\ta := &acquisition{l: l, clusterObj: cluster, cl: cl, m: m, lockName: lockName, log: log}\n"}}},
	{name: "unlock-withdraws-without-retiring", scenario: "late-writes",
		rule: "late writes are harmless: a release retires the grant before any destructive write",
		edits: []edit{{"pkg/initlock/internal/engine/decide_unlock.go",
			"\tcase regMine && g.Held() && !o.mine(g.Token):\n",
			"\tcase regMine && g.Held() && !o.mine(g.Token) && false:\n"}}},
	{name: "reliance-ignores-tokens", scenario: "late-writes",
		rule: "late writes are harmless: the holder relies on the register and the lock only when they carry one token",
		edits: []edit{{"pkg/initlock/internal/engine/decide_lock.go",
			"\treturn g.Token != \"\" && g.Token == r.Token &&\n",
			"\treturn true &&\n"}}},
	{name: "withdraw-while-lock-write-may-land", scenario: "upstream-late",
		rule: "late writes are harmless: a grant is withdrawn only when no lock write of the call may still land",
		edits: []edit{{"pkg/initlock/internal/engine/decide_lock.go",
			"\t\tif o.Uncertain {\n\t\t\treturn RegisterNone\n\t\t}\n",
			""}}},
	{name: "yield-a-lock-held-before", scenario: "upstream-holder-lost",
		rule: "defence in depth: a caller never hands over a lock that named it before its call rewrote it",
		edits: []edit{{"pkg/initlock/internal/engine/decide_lock.go",
			" && o.mine(o.Lock.Record.Token) && !d.HeldBefore):\n",
			" && o.mine(o.Lock.Record.Token)):\n"}}},
	{name: "held-before-not-found", scenario: "upstream-holder-lost",
		rule: "defence in depth: the first decision of a call finds whether the lock named the caller before the call wrote it",
		edits: []edit{{"pkg/initlock/internal/engine/decide_lock.go",
			"\treturn o.HeldBefore || (o.FirstRead && lockOf(o) == lockCaller && !o.mine(o.Lock.Record.Token))\n",
			"\treturn o.HeldBefore\n"}}},
	{name: "register-only-protection", scenario: "loss",
		rule: "defence in depth: a lock naming another existing Machine refuses the caller whatever the register says",
		edits: []edit{{"pkg/initlock/internal/engine/decide_lock.go",
			"\tcase lk == lockOther:\n",
			"\tcase lk == lockOther && g != grantNone:\n"}}},
	{name: "claim-without-compare-and-swap", scenario: "race-annotated",
		rule: "the register is written only by compare-and-swap against the value read",
		edits: []edit{{"pkg/initlock/internal/engine/grant.go",
			"\t\tmap[string]any{\"op\": \"test\", \"path\": grantPointer, \"value\": cl.Grant.raw},\n",
			""}, {"pkg/initlock/internal/engine/grant.go",
			"\t\tmap[string]any{\"op\": \"test\", \"path\": grantPointer, \"value\": nil},\n",
			""}}},
	{name: "stale-caller-granted", scenario: "stale-caller",
		rule: "identity by UID: a caller whose Machine object is not the live Machine is refused, by one predicate (Lock's decision and its claim, Unlock's decision)",
		edits: []edit{{"pkg/initlock/internal/engine/predicates.go",
			"\treturn live != nil && (passed == nil || passed.UID == \"\" || live.UID == passed.UID)\n",
			"\treturn live != nil\n"}}},
	{name: "unlock-matches-by-name", scenario: "unlock-stale",
		rule: "identity by UID: Unlock releases only the exact Machine's grant and lock (by the records' UIDs, and the caller's live UID)",
		edits: []edit{{"pkg/initlock/internal/engine/decide_unlock.go",
			"\tif !anyHolder && !sameMachine(o.Caller, o.CallerLive) {\n",
			"\tif false && !anyHolder && !sameMachine(o.Caller, o.CallerLive) {\n"}, {"pkg/initlock/internal/engine/decide_unlock.go",
			"\tlockMine := o.Lock != nil && (anyHolder && foundFirst(o) || o.Lock.Record.Names(o.Cluster, o.Caller))\n",
			"\tlockMine := o.Lock != nil && (anyHolder && foundFirst(o) || o.Lock.Record.MachineName == o.Caller.Name)\n"}, {"pkg/initlock/internal/engine/decide_unlock.go",
			"\tregMine := g != nil && (anyHolder && grantFoundFirst(o, g) || (g.Held() && g.Names(o.Cluster, o.Caller)))\n",
			"\tregMine := g != nil && (anyHolder && grantFoundFirst(o, g) || (g.Held() && g.MachineName == o.Caller.Name))\n"}}},
	{name: "unlock-releases-a-lock-made-since", scenario: "mutex-unlock-lost",
		rule: "a release of whoever holds the lock (the drop-in mutex's, an operator's) releases, in its later rounds, only the lock its first read found",
		edits: []edit{{"pkg/initlock/internal/engine/decide_unlock.go",
			"\tif !o.Pinned {\n\t\treturn true\n\t}\n\tp, l := o.PinnedLock, o.Lock\n",
			"\tif true {\n\t\treturn true\n\t}\n\tp, l := o.PinnedLock, o.Lock\n"}}},
	{name: "unlock-withdraws-a-grant-made-since", scenario: "mutex-unlock-lost",
		rule: "a release of whoever holds the lock withdraws, in its later rounds, only the grant its first read found or the one it wrote",
		edits: []edit{{"pkg/initlock/internal/engine/decide_unlock.go",
			"\treturn !o.Pinned || g.Raw() == o.PinnedRegister || o.mine(g.Token)\n",
			"\treturn true\n"}}},
	{name: "manager-decides-on-cache", scenario: "manager-replaced",
		rule: "the manager adopts and releases only against a Cluster UID confirmed live",
		edits: []edit{{"pkg/initlock/internal/engine/keep.go",
			"\tobs, confirmed, err := Confirm(ctx, live, o, d, p, now)\n",
			"\tobs, confirmed, err := o, d, error(nil)\n"}, {"pkg/initlock/internal/engine/keep.go",
			"\t\tseen, d2, err := Confirm(ctx, live, again, confirmed, p, now)\n",
			"\t\tseen, d2, err := again, confirmed, error(nil)\n"}}},
	{name: "lock-write-races-claim", scenario: "pause",
		rule: "no write races the pause test: the lock is written only once the claim that tests the pause is",
		edits: []edit{{"pkg/initlock/internal/engine/lock.go",
			"\ttoken := a.token()\n\tlive, gerr, merr := a.claimAndConfirm(ctx, a.cl, token)\n",
			"\ttoken := a.token()\n\tvar cerr error\n\tcreated := make(chan struct{})\n" +
				"\tgo func() { defer close(created); _, cerr = createLock(ctx, a.l.Client, a.cl, a.lockName, a.record(a.m, token)) }()\n" +
				"\tlive, gerr, merr := a.claimAndConfirm(ctx, a.cl, token)\n\t<-created\n"}, {"pkg/initlock/internal/engine/lock.go",
			"\t\t_, cerr := createLock(ctx, a.l.Client, a.cl, a.lockName, a.record(a.m, token))\n\t\ta.noteLockWrite(cerr, d, token)\n",
			"\t\ta.noteLockWrite(cerr, d, token)\n"}}},
	{name: "free-path-grants-undecided", scenario: "stale-caller",
		rule: "one decision: the free path grants only what Decide grants on the view its claim proved (the caller's Machine read live among it)",
		edits: []edit{{"pkg/initlock/internal/engine/lock.go",
			"\t\tif !d.Acquired || d.Register != RegisterClaim || d.Action != ActionCreate || d.ReadCallerFirst {\n",
			"\t\tif false {\n"}}},
	{name: "unlock-trusts-caller-object", scenario: "restore-unlock",
		rule: "identity on Unlock: an object of a Machine restored since never releases what the restored Machine holds",
		edits: []edit{{"pkg/initlock/internal/engine/decide_unlock.go",
			"\tif !anyHolder && !sameMachine(o.Caller, o.CallerLive) {\n",
			"\tif false && !anyHolder && !sameMachine(o.Caller, o.CallerLive) {\n"}, unlockTrustsClusterObject}},
	{name: "unlock-reads-caller-with-cluster", scenario: "restore-unlock",
		rule: "identity on Unlock: the caller's Machine is read after the lock and the Cluster, so that a restore between the reads shows",
		edits: []edit{{"pkg/initlock/internal/engine/read.go",
			"\tif q.Caller != nil && q.Intent != IntentUnlock {\n",
			"\tif q.Caller != nil {\n"}, {"pkg/initlock/internal/engine/read.go",
			"\t\tif q.Caller != nil {\n\t\t\tif o.CallerLive, err = getMachine(",
			"\t\tif false {\n\t\t\tif o.CallerLive, err = getMachine("}, unlockTrustsClusterObject}},
	{name: "claim-over-name-only-grant-unconfirmed", scenario: "restore-relock",
		rule: "identity across a restore: a grant naming the caller by name only is replaced only once the caller's Machine, read after the Cluster, is the caller's object",
		edits: []edit{{"pkg/initlock/internal/engine/decide_lock.go",
			"\treturn d.Register == RegisterClaim && g.Held() && o.CallerLive != nil &&\n",
			"\treturn false && d.Register == RegisterClaim && g.Held() && o.CallerLive != nil &&\n"}}},
	{name: "guard-lets-any-delete-through", scenario: "upstream-delete",
		rule: "a lock is held from the instant it exists: the lock guard refuses every delete of a lock not marked for release",
		edits: []edit{{"config/protection/lock-guard.yaml",
			"      request.operation != 'DELETE' || variables.terminating ||\n",
			"      true ||\n"}}},
	{name: "guard-lets-updates-reshape", scenario: "reshaped-lock",
		rule: "a lock is held from the instant it exists: the lock guard refuses an update that takes its shape away, marked or not",
		edits: []edit{{"config/protection/lock-guard.yaml",
			"      request.operation != 'UPDATE' || variables.terminating ||\n",
			"      true ||\n"}}},
	{name: "guard-lets-the-collector-through", scenario: "marks-left-restoring",
		rule: "a mark left on a lock never lets the garbage collector take it, whatever user it runs as: the lock guard refuses every delete that names a propagation policy, as all the collector's do",
		edits: []edit{{"config/protection/lock-guard.yaml",
			"      (!variables.propagating &&\n",
			"      (true &&\n"}}},
	{name: "guard-mark-without-version", scenario: "mark-replayed",
		rule: "no replay revives a release: the lock guard lets a marked lock's delete through only when it names the lock's current resourceVersion",
		edits: []edit{{"config/protection/lock-guard.yaml",
			"((variables.marked && variables.onCurrentVersion) ||",
			"((variables.marked) ||"}}},
	{name: "guard-mark-of-any-lock", scenario: "mark-of-an-earlier-lock",
		rule: "a mark counts only on the lock that wrote it: the lock guard lets a marked lock's delete through only when the mark names the lock's own UID",
		edits: []edit{{"config/protection/lock-guard.yaml",
			"      variables.annotations['initlock.dev/releasable'] == oldObject.metadata.uid",
			"      true"}}},
	{name: "guard-record-key-unescaped", scenario: "record-escaped",
		rule: "a lock is held from the instant it exists, however its record is written: the lock guard reads the record's machineName key in any case, each letter as itself or as a JSON escape, as Go's decoder does",
		edits: []edit{{"config/protection/lock-guard.yaml",
			"oldObject.data['lock-information'].matches('(?i)\"(?:m|\\\\\\\\u00[46]d)(?:a|\\\\\\\\u00[46]1)(?:c|\\\\\\\\u00[46]3)(?:h|\\\\\\\\u00[46]8)(?:i|\\\\\\\\u00[46]9)(?:n|\\\\\\\\u00[46]e)(?:e|\\\\\\\\u00[46]5)(?:n|\\\\\\\\u00[46]e)(?:a|\\\\\\\\u00[46]1)(?:m|\\\\\\\\u00[46]d)(?:e|\\\\\\\\u00[46]5)\"\\\\s*:')",
			"oldObject.data['lock-information'].matches('(?i)\"machinename\"\\\\s*:')"}}},
	{name: "holder-known-by-uid", scenario: "holder-restored-keeper",
		rule: "a holder restored alone is the holder still: a record keeps out every other Machine while a Machine of its name exists, whatever its UID",
		edits: []edit{{"pkg/initlock/internal/engine/predicates.go",
			"\tcase o.Lock.Record.Claims(o.Holder) && !sameName(o.CallerLive, o.Holder):\n",
			"\tcase o.Holder != nil && o.Lock.Record.Names(o.Cluster, o.Holder):\n"}}},
	{name: "grantee-known-by-uid", scenario: "holder-restored",
		rule: "a holder restored alone is the holder still: a grant keeps out every other Machine while a Machine of its name exists, whatever its UID",
		edits: []edit{{"pkg/initlock/internal/engine/predicates.go",
			"\tcase g.Claims(o.Granted) && !sameName(o.CallerLive, o.Granted):\n",
			"\tcase o.Granted != nil && g.Names(o.Cluster, o.Granted):\n"}}},
	{name: "release-of-a-restored-holder-unforced", scenario: "holder-restored-operator",
		rule: "an operator's release of a lock whose holder was restored alone needs --force",
		edits: []edit{{"pkg/initlock/internal/engine/decide_unlock.go",
			"\tif o.Lock != nil && o.Lock.Problem == nil && o.Lock.Record.Claims(o.Holder) {\n",
			"\tif o.Lock != nil && o.Lock.Problem == nil && o.Holder != nil && o.Lock.Record.Names(cl, o.Holder) {\n"}}},
	{name: "keeper-keeps-marks-while-it-waits", scenario: "marks-left-restoring",
		rule: "a held lock is protected again: the keeper takes marks left on it off while it waits for the holder a restore brings back",
		edits: []edit{{"pkg/initlock/internal/engine/decide_keep.go",
			"\tif d.Action != ActionNone || d.Err != nil || !marksLeft(o) {\n",
			"\tif d.Action != ActionNone || d.Err != nil || d.Wait != WaitNone || !marksLeft(o) {\n"}}},
	{name: "keeper-keeps-a-failed-moves-mark", scenario: "move-mark-left",
		rule: "a held lock is protected again: the keeper takes off the delete-for-move a failed move left on the lock of an unpaused Cluster",
		edits: []edit{{"pkg/initlock/internal/engine/decide_keep.go",
			"l.Deleting || (!l.Releasable && !l.MoveMark) {",
			"l.Deleting || !l.Releasable {"}}},
	{name: "keeper-releases-held-lock", scenario: "holder-recreated",
		rule: "keepers release a lock of an uninitialised Cluster only when the Machine it names is gone",
		edits: []edit{{"pkg/initlock/internal/engine/decide_keep.go",
			"\tcase d.Verdict == VerdictStaleHolder && grantOf(o) == grantNone:\n",
			"\tcase (d.Verdict == VerdictStaleHolder || d.Verdict == VerdictHealthy) && grantOf(o) == grantNone:\n"}}},
	{name: "keeper-releases-deleting-clusters-held-lock", scenario: "cluster-deleting",
		rule: "keepers release the lock of a Cluster being deleted only once the Machine it names is gone",
		edits: []edit{{"pkg/initlock/internal/engine/decide_keep.go",
			"\tcase o.Cluster.Deleting && (o.Holder != nil || grantOf(o) != grantNone):\n",
			"\tcase false:\n"}}},
	{name: "keeper-releases-a-young-lock-of-a-gone-holder", scenario: "restore-cluster-first",
		rule: "keepers release a gone holder's lock only once it is older than the grace period: a restore may bring the holder after the lock",
		edits: []edit{{"pkg/initlock/internal/engine/decide_keep.go",
			"\t\tif until := restoredSince(lk, o.Cluster).Add(p.OrphanGrace); until.After(now) {\n",
			"\t\tif until := restoredSince(lk, o.Cluster).Add(p.OrphanGrace); until.After(now) && false {\n"}}},
	{name: "keeper-releases-a-gone-holders-lock-of-a-young-cluster", scenario: "restore-over-lock",
		rule: "keepers release a gone holder's lock only once its Cluster is older than the grace period too: a restore that leaves the kept lock as it is may bring the holder after the Cluster",
		edits: []edit{{"pkg/initlock/internal/engine/decide_keep.go",
			"\tif c.Created.After(l.Created) {\n",
			"\tif false {\n"}}},
	{name: "keeper-release-unconfirmed-holder", scenario: "holder-recreated",
		rule: "keepers confirm a gone holder with a live read before they release its lock",
		edits: []edit{{"pkg/initlock/internal/engine/keep.go",
			"\tif d.Action == ActionRelease || d.Action == ActionCollect {\n",
			"\tif false {\n"}}},
	{name: "take-over-a-lock-being-deleted", scenario: "deleting-takeover",
		rule: "a lock being deleted counts as held: the library never takes it over",
		edits: []edit{{"pkg/initlock/internal/engine/decide_lock.go",
			"\tcase o.Lock != nil && o.Lock.Deleting:\n",
			"\tcase o.Lock != nil && o.Lock.Deleting && false:\n"}}},
	{name: "keeper-deletes-past-holder-back", scenario: "keeper-holder-back",
		rule: "a keeper decides again once it has marked the lock: a holder seen back after the mark stops the release",
		edits: []edit{{"pkg/initlock/internal/engine/keep.go",
			"\t\tcase d2.Action == confirmed.Action:\n\t\t\treturn false, nil\n",
			"\t\tcase true:\n\t\t\treturn false, nil\n"}}},
	{name: "operator-releases-a-lock-made-since", scenario: "operator-lock-appears",
		rule: "an operator's release releases what it inspected: a lock created since it found none is left alone",
		edits: []edit{{"pkg/initlock/internal/engine/unlock.go",
			"\tif r.opts.noLock && cm != nil {\n",
			"\tif false {\n"}}},
	{name: "operator-withdraws-on-old-reading", scenario: "operator-grantee-back",
		rule: "an operator's release without Force reads the Machines again once it has retired the grant: one back since stops the withdraw",
		edits: []edit{{"pkg/initlock/internal/engine/unlock.go",
			"\t\t\tif !r.opts.checksForce() {\n\t\t\t\tobs.Cluster, known = after, &obs\n",
			"\t\t\tif true {\n\t\t\t\tobs.Cluster, known = after, &obs\n"}}},
	{name: "operator-deletes-past-holder-back", scenario: "operator-holder-back",
		rule: "an operator's release without Force decides again once it has marked the lock: a holder seen back after the mark stops it",
		edits: []edit{{"pkg/initlock/internal/engine/unlock_writes.go",
			"\t\tif d := Decide(again, Policy{}, now); d.NeedsForce {\n",
			"\t\tif d := Decide(again, Policy{}, now); d.NeedsForce && false {\n"}}},
	{name: "unmark-takes-the-moves-mark", scenario: "release-during-move",
		rule: "a release takes off its own mark only: a move's delete-for-move stays on the lock of a paused Cluster",
		edits: []edit{{"pkg/initlock/internal/engine/release.go",
			"\t\tdelete(next.Annotations, ReleaseAnnotation)\n\t\tdelete(next.Annotations, ReleaseStartedAnnotation)\n",
			"\t\tdropMarks(next)\n"}}},
	{name: "relink-reads-owners-one-by-one", scenario: "relink-owner-deleted",
		rule: "the relinker confirms each owner right before its patch: the reads of a patch's owners go out together, none after another's answer",
		edits: []edit{{"internal/relink/confirm.go",
			"\t\twg.Go(func() { out[j] = l.get(ctx, id, seen) })\n",
			"\t\tout[j] = l.get(ctx, id, seen)\n"}}},
	{name: "claim-ignores-pause", scenario: "pause",
		rule: "no write to a paused Cluster: the claim tests that the Cluster is not paused",
		edits: []edit{{"pkg/initlock/internal/engine/grant.go",
			"\tops = append(ops, map[string]any{\"op\": \"test\", \"path\": pausedPointer, \"value\": nil})\n",
			""}, {"pkg/initlock/internal/engine/grant.go",
			"\tdefault:\n\t\tops = append(ops, map[string]any{\"op\": \"test\", \"path\": \"/spec/paused\", \"value\": nil})\n",
			""}}},
}

// unlockTrustsClusterObject drops Unlock's check of the Cluster object
// passed, the other layer of its identity check.
var unlockTrustsClusterObject = edit{"pkg/initlock/internal/engine/decide_unlock.go",
	"\tif o.Intent != IntentRelease && o.CallerCluster != \"\" && o.Cluster != nil && o.Cluster.UID != o.CallerCluster {\n",
	"\tif false {\n"}

// TestMutations applies each mutation to a copy of the module and runs its
// scenario there, which must report a counterexample. It takes minutes: it
// runs with INITLOCK_EXPLORE_MUTATIONS=1 (make explore).
func TestMutations(t *testing.T) {
	if os.Getenv("INITLOCK_EXPLORE_MUTATIONS") == "" {
		t.Skip("set INITLOCK_EXPLORE_MUTATIONS=1 (make explore) to run the mutation check")
	}
	root := moduleRoot(t)
	copyDir := t.TempDir()
	copyModule(t, root, copyDir)
	found := regexp.MustCompile(`violation of (\S+) in (\d+) steps`)
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			restore := apply(t, copyDir, m.edits)
			defer restore()
			cmd := exec.Command("go", "test", "-count=1", "-run", "^TestExplore$/^"+m.scenario+"$", "-v", "./internal/explore/")
			cmd.Dir = copyDir
			cmd.Env = append(os.Environ(), "INITLOCK_EXPLORE_MUTATIONS=")
			out, _ := cmd.CombinedOutput()
			match := found.FindSubmatch(out)
			if match == nil {
				t.Fatalf("scenario %s found no counterexample to mutation %q (%s):\n%s", m.scenario, m.name, m.rule, tail(out, 40))
			}
			t.Logf("%s: caught by scenario %s: violation of %s in %s steps", m.rule, m.scenario, match[1], match[2])
		})
	}
}

// TestMutationTextsFound checks, without building anything, that the text
// every mutation edits occurs exactly once in its file (an edit applied
// after another of the same mutation is checked on the edited text), so
// that a change to the code that moves or rewrites a mutated line fails in
// make quick, not only in the long mutation check.
func TestMutationTextsFound(t *testing.T) {
	root := moduleRoot(t)
	for _, m := range mutations {
		edited := map[string][]byte{}
		for _, e := range m.edits {
			data, ok := edited[e.file]
			if !ok {
				var err error
				if data, err = os.ReadFile(filepath.Join(root, e.file)); err != nil {
					t.Fatalf("%s: %v", m.name, err)
				}
			}
			if n := bytes.Count(data, []byte(e.old)); n != 1 {
				t.Errorf("%s: %s: the text to mutate occurs %d times; update the mutation:\n%s", m.name, e.file, n, e.old)
				continue
			}
			edited[e.file] = bytes.Replace(data, []byte(e.old), []byte(e.new), 1)
		}
	}
}

func moduleRoot(t *testing.T) string {
	// In a workspace, go list -m lists every module of go.work.
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// copyModule copies the files git knows of (tracked or not ignored).
func copyModule(t *testing.T, root, dst string) {
	cmd := exec.Command("git", "ls-files", "-co", "--exclude-standard", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// apply makes the edits and returns a function that undoes them. An edit
// that cannot be made undoes the ones made before it, so that the next
// mutation starts from the unmutated copy.
func apply(t *testing.T, dir string, edits []edit) func() {
	saved := map[string][]byte{}
	restore := func() {
		for p, data := range saved {
			_ = os.WriteFile(p, data, 0o644)
		}
	}
	for _, e := range edits {
		p := filepath.Join(dir, e.file)
		data, err := os.ReadFile(p)
		if err != nil {
			restore()
			t.Fatal(err)
		}
		if _, ok := saved[p]; !ok {
			saved[p] = data
		}
		if n := bytes.Count(data, []byte(e.old)); n != 1 {
			restore()
			t.Fatalf("%s: the text to mutate occurs %d times; update the mutation:\n%s", e.file, n, e.old)
		}
		if err := os.WriteFile(p, bytes.Replace(data, []byte(e.old), []byte(e.new), 1), 0o644); err != nil {
			restore()
			t.Fatal(err)
		}
	}
	return restore
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
