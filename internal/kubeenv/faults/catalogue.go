package faults

// Class names a fault class.
type Class string

// Side is a fault injector that maps from the catalogue.
type Side string

// The sides.
const (
	// Chaos is internal/chaos: seeded runs on a real API server.
	Chaos Side = "chaos"
	// Explorer is internal/explore: every interleaving on the model API
	// server.
	Explorer Side = "explorer"
)

// Sides are the sides, in order.
var Sides = []Side{Chaos, Explorer}

// Group is where a fault happens.
type Group string

// The groups, in the catalogue's order.
const (
	Request Group = "request"
	Cache   Group = "cache"
	Object  Group = "object"
	Process Group = "process"
	Work    Group = "guarded work"
)

// The fault classes.
const (
	Conflict           Class = "conflict"
	ServerError        Class = "server-error"
	Timeout            Class = "timeout"
	LostResponse       Class = "lost-response"
	LateWrite          Class = "late-write"
	Refused            Class = "refused"
	Latency            Class = "latency"
	StaleCallerView    Class = "stale-caller-view"
	ManagerCacheLag    Class = "manager-cache-lag"
	RelinkerCacheLag   Class = "relinker-cache-lag"
	LockDeleted        Class = "lock-deleted"
	LockCollected      Class = "lock-collected"
	LockDeletionHeld   Class = "lock-deletion-held"
	MarkLeft           Class = "mark-left"
	RegisterReverted   Class = "register-reverted"
	RegisterRemoved    Class = "register-removed"
	MachineRecreated   Class = "machine-recreated"
	MachineDeleted     Class = "machine-deleted"
	Pause              Class = "pause"
	ClusterReplaced    Class = "cluster-replaced"
	ClusterDeleted     Class = "cluster-deleted"
	BackupRestore      Class = "backup-restore"
	ClusterRestoredOld Class = "cluster-restored-old"
	SameNameOwner      Class = "same-name-owner"
	ManagerKilled      Class = "manager-killed"
	CallCutOff         Class = "call-cut-off"
	InitCompletes      Class = "init-completes"
	InitFails          Class = "init-fails"
	Relock             Class = "relock"
)

// Entry is one fault class.
type Entry struct {
	Class Class
	Group Group
	// Meaning is what the real world does, in one line.
	Meaning string
	// Unmodelled tells, for each side that does not model the class, why.
	Unmodelled map[Side]string
}

// Models tells whether side s models the class.
func (e Entry) Models(s Side) bool {
	_, no := e.Unmodelled[s]
	return !no
}

// relinkerUnexplored is why the explorer models no fault of the relinker.
const relinkerUnexplored = "the explorer drives the lock's protocol, not the relinker; test/relink's tests " +
	"run the relinker on the real API server with each fault"

// catalogue is every fault class, in report order.
var catalogue = []Entry{
	{Class: Conflict, Group: Request,
		Meaning: "the API server answers a write 409 Conflict without applying it",
		Unmodelled: map[Side]string{Explorer: "the model answers 409 only to a real conflict (a taken name, a failed " +
			"precondition, an old resourceVersion), which the interleavings make; a made-up one is a write not applied, as server-error"}},
	{Class: ServerError, Group: Request,
		Meaning: "the API server answers 5xx without applying the request (overloaded, restarting, a webhook down)"},
	{Class: Timeout, Group: Request,
		Meaning:    "the request never reaches the API server and the client times out",
		Unmodelled: map[Side]string{Explorer: "a write held back and never applied (late-write) is one; reads are not faulted"}},
	{Class: LostResponse, Group: Request,
		Meaning: "the API server applies a write and its answer is lost: the client gets a timeout or a 5xx and cannot tell"},
	{Class: LateWrite, Group: Request,
		Meaning: "the client gives up on a write (a timeout, a 5xx) that the API server applies later, or never"},
	{Class: Refused, Group: Request,
		Meaning: "the API server refuses a write 403 Forbidden: a missing permission, an admission webhook",
		Unmodelled: map[Side]string{Chaos: "its actors run with full rights and no webhook; a refusal is " +
			"deterministic, so the explorer takes it at every write and test/library runs Lock and Unlock without each permission"}},
	{Class: Latency, Group: Request,
		Meaning:    "a request takes a while to be answered",
		Unmodelled: map[Side]string{Explorer: "time does not pass: every interleaving of the requests stands for every delay"}},
	{Class: StaleCallerView, Group: Cache,
		Meaning: "a provider calls Lock or Unlock with the Cluster and the Machine its informer cache shows, behind the server"},
	{Class: ManagerCacheLag, Group: Cache,
		Meaning: "the manager's informer cache lags behind the server"},
	{Class: RelinkerCacheLag, Group: Cache,
		Meaning:    "the relinker's informer cache lags behind the server: it still shows an owner deleted or replaced since",
		Unmodelled: map[Side]string{Explorer: relinkerUnexplored}},
	{Class: LockDeleted, Group: Object,
		Meaning: "an operator or a tool deletes the lock ConfigMap"},
	{Class: LockCollected, Group: Object,
		Meaning: "the garbage collector deletes the lock: its owner's UID is gone (a naive copy points it at a Cluster UID that does not exist)"},
	{Class: LockDeletionHeld, Group: Object,
		Meaning: "another controller's finalizer holds the lock being deleted, which stays, terminating, until it is removed"},
	{Class: MarkLeft, Group: Object,
		Meaning: "a lock keeps a mark that lets its delete through: a release stopped between its mark and its delete, " +
			"or a clusterctl move that failed after marking the source objects for deletion"},
	{Class: RegisterReverted, Group: Object,
		Meaning:    "the Cluster's grant register goes back to an earlier value in place (a PUT of an old copy)",
		Unmodelled: map[Side]string{Chaos: "an older register comes back only with its Cluster, under a new UID (cluster-restored-old)"}},
	{Class: RegisterRemoved, Group: Object,
		Meaning: "the grant register's annotation is removed (a tool that rewrites the annotations)",
		Unmodelled: map[Side]string{Chaos: "a Cluster restored from the copy made at setup comes back without it, under a new UID " +
			"(cluster-restored-old); nothing removes it in place"}},
	{Class: MachineRecreated, Group: Object,
		Meaning: "a Machine is deleted and created again under its name, with a new UID"},
	{Class: MachineDeleted, Group: Object,
		Meaning:    "a Machine is deleted for good",
		Unmodelled: map[Side]string{Chaos: "Machines go only with their Cluster (cluster-deleted) or come back (machine-recreated)"}},
	{Class: Pause, Group: Object,
		Meaning: "the Cluster is paused (spec.paused) and unpaused later"},
	{Class: ClusterReplaced, Group: Object,
		Meaning:    "the Cluster, its Machines and its lock are deleted, and a new Cluster is created under the same name",
		Unmodelled: map[Side]string{Chaos: "a Cluster comes back only restored (backup-restore, cluster-restored-old)"}},
	{Class: ClusterDeleted, Group: Object,
		Meaning: "a Cluster and its Machines are deleted for good: the Cluster held by Cluster API's finalizer while its Machines go " +
			"(the explorer keeps it there; chaos lets it go, and the lock is collected after the orphan grace)"},
	{Class: BackupRestore, Group: Object,
		Meaning: "a Cluster, its Machines and its lock are backed up and restored later as Velero restores them " +
			"(new UIDs, no ownerReferences, no status), a call's requests falling on both sides"},
	{Class: ClusterRestoredOld, Group: Object,
		Meaning: "the Cluster alone is deleted and restored from an older backup: a new UID, its grant register older or absent",
		Unmodelled: map[Side]string{Explorer: "backup-restore restores from a backup taken any number of steps " +
			"before, and register-reverted brings an older register back in place"}},
	{Class: SameNameOwner, Group: Object,
		Meaning: "an owner is deleted and an unrelated object takes its name; a restore then skips it (it exists) " +
			"and brings back its dependents",
		Unmodelled: map[Side]string{Explorer: relinkerUnexplored}},
	{Class: ManagerKilled, Group: Process,
		Meaning: "a manager process is killed (SIGKILL) and started again",
		Unmodelled: map[Side]string{Explorer: "one reconciler runs, each reconcile to its end; a write of it held back " +
			"(late-write) stands for one a killed process left in flight"}},
	{Class: CallCutOff, Group: Process,
		Meaning: "a Lock call ends mid-way: its process dies or its reconcile's context ends",
		Unmodelled: map[Side]string{Explorer: "every call runs to its end; a write held back or answered lost " +
			"(late-write, lost-response) ends it in an error as a cut-off does"}},
	{Class: InitCompletes, Group: Work,
		Meaning: "the control plane is initialised while a Machine holds the lock"},
	{Class: InitFails, Group: Work,
		Meaning: "the init the lock guards fails: the provider calls Unlock and tries again"},
	{Class: Relock, Group: Work,
		Meaning: "the holder's reconcile ends before its bootstrap data is written, and the next one calls Lock again"},
}

// Lookup returns the entry of class c.
func Lookup(c Class) (Entry, bool) {
	for _, e := range catalogue {
		if e.Class == c {
			return e, true
		}
	}
	return Entry{}, false
}

// Modelled returns the classes side s models, in report order.
func Modelled(s Side) []Class {
	var out []Class
	for _, e := range catalogue {
		if e.Models(s) {
			out = append(out, e.Class)
		}
	}
	return out
}
