package mpi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adimpi/adimpi/internal/pmi"
)

// Spawning processes (MPI_Comm_spawn). The root asks the launcher, over
// PMI-1's or PMI-2's spawn command, to start the children as a new job
// with the same device, passing a port it opened in the children's
// key-value space (PARENT_ROOT_PORT_NAME). The children's Init connects to that port from
// their root; the parents accept on it: the intercommunicator between
// them is an accept/connect pair like any other (joinGroups).

// SpawnCommand is one command of CommSpawnMultiple: MaxProcs processes of
// Command with Argv (without the program name), and hints in Info.
//
// The Info keys mpirun understands: "wdir" (the children's working
// directory), "path" (colon-separated directories to find Command in),
// "host" (where to start them: this host or another host of the job,
// reached through the job's launcher; under srun, srun's --nodelist).
// Other keys are ignored.
type SpawnCommand struct {
	Command  string
	Argv     []string
	MaxProcs int
	Info     *Info
}

// parent is MPI_COMM_PARENT of a spawned process.
var parent atomic.Pointer[Comm]

// CommGetParent returns the intercommunicator to the job that spawned
// this one (MPI_Comm_get_parent), or nil when it was not spawned or has
// disconnected from its parent.
func CommGetParent() *Comm { return parent.Load() }

// CommSpawn starts maxprocs processes of command with argv and returns
// the intercommunicator between comm's processes (the local group) and
// the children (the remote group, their MPI_COMM_WORLD), with one error
// per child: nil for a child that started (MPI_Comm_spawn). It is
// collective over comm; command, argv, maxprocs and info matter at root
// only. When the launcher cannot start them all it starts none: the call
// returns an ErrSpawn error, the errors say which children failed, and
// every process of comm goes on.
func CommSpawn(command string, argv []string, maxprocs int, info *Info, root int, comm *Comm) (*Comm, []error, error) {
	return commSpawn("MPI_Comm_spawn", []SpawnCommand{{Command: command, Argv: argv, MaxProcs: maxprocs, Info: info}}, root, comm)
}

// CommSpawnMultiple is CommSpawn for several commands started as one job
// (MPI_Comm_spawn_multiple): the children of cmds[0] come first in their
// world, then those of cmds[1], and so on; each child's MPI_APPNUM is its
// command's index.
func CommSpawnMultiple(cmds []SpawnCommand, root int, comm *Comm) (*Comm, []error, error) {
	return commSpawn("MPI_Comm_spawn_multiple", cmds, root, comm)
}

func commSpawn(op string, cmds []SpawnCommand, root int, comm *Comm) (*Comm, []error, error) {
	r, err := collStart(op, comm)
	if err != nil {
		return nil, nil, comm.raise(err)
	}
	if comm.inter {
		return nil, nil, comm.raise(errorf(ErrComm, op, "%s is an intercommunicator; want an intracommunicator", comm.name))
	}
	if root < 0 || root >= comm.Size() {
		return nil, nil, comm.raise(errorf(ErrRoot, op, "root %d is out of range [0, %d)", root, comm.Size()))
	}
	// The root's verdict: [total u64, 1] started, or [total u64, 0,
	// failed flag per child..., message].
	var verdict []byte
	var kids *childRoot
	if comm.rank == root {
		verdict, kids = spawnAtRoot(op, r, cmds)
	}
	verdict, err = bcastBytes(comm.newColl(r, op), verdict, root)
	if err != nil {
		kids.close()
		return nil, nil, comm.raise(err)
	}
	total := int(binary.LittleEndian.Uint64(verdict))
	errs := make([]error, total)
	if verdict[8] != 1 {
		msg := string(verdict[9+total:])
		for i := range errs {
			if verdict[9+i] != 0 {
				errs[i] = errorf(ErrSpawn, op, "child %d: %s", i, msg)
			} else {
				errs[i] = errorf(ErrSpawn, op, "child %d: not started: another child of the spawn failed", i)
			}
		}
		return nil, errs, comm.raise(errorf(ErrSpawn, op, "%s", msg))
	}
	n, err := joinGroups(op, comm, root, kids.answer, comm.name+".spawn")
	kids.close()
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return nil, errs, comm.raise(err)
	}
	return n, errs, nil
}

// spawnAtRoot checks the commands, opens the port the children will
// connect to, asks the launcher to start them and waits, for at most the
// spawn's timeout, until their root has connected; it returns the verdict
// to broadcast and, when they started, the connection to their root.
func spawnAtRoot(op string, r *runtime, cmds []SpawnCommand) ([]byte, *childRoot) {
	total := 0
	for _, c := range cmds {
		total += max(c.MaxProcs, 0)
	}
	// fail is the verdict of a failed spawn: the children of command bad
	// failed (every child when bad is -1), the others were not started.
	fail := func(bad int, msg string) []byte {
		v := binary.LittleEndian.AppendUint64(nil, uint64(total))
		v = append(v, 0)
		for i, c := range cmds {
			f := byte(0)
			if bad < 0 || bad == i {
				f = 1
			}
			for k := 0; k < max(c.MaxProcs, 0); k++ {
				v = append(v, f)
			}
		}
		return append(v, msg...)
	}
	timeout, err := spawnTimeout(op, cmds)
	if err != nil {
		return fail(-1, err.Error()), nil
	}
	var pcmds []pmi.SpawnCmd
	for i, c := range cmds {
		if c.Command == "" || c.MaxProcs < 1 {
			return fail(-1, errorf(ErrArg, op, "command %d: want a command and maxprocs ≥ 1 (got %q, %d)", i, c.Command, c.MaxProcs).Error()), nil
		}
		if err := checkLocalCommand(i, c); err != nil {
			return fail(i, err.Error()), nil
		}
		pc := pmi.SpawnCmd{Command: c.Command, Args: c.Argv, MaxProcs: c.MaxProcs}
		if c.Info != nil {
			nk, _ := c.Info.NKeys()
			for k := 0; k < nk; k++ {
				key, _ := c.Info.NthKey(k)
				if key == infoTimeout {
					continue // adimpi's own key, not the launcher's
				}
				v, _, _ := c.Info.Get(key)
				pc.Info = append(pc.Info, [2]string{key, v})
			}
		}
		pcmds = append(pcmds, pc)
	}
	portName, err := OpenPort(nil)
	if err != nil {
		return fail(-1, err.Error()), nil
	}
	start := time.Now()
	if err := r.pmi.SpawnWithin(pcmds, [][2]string{{pmi.PreputParentPort, portName}}, timeout); err != nil {
		_ = ClosePort(portName)
		var se *pmi.SpawnError
		if errors.As(err, &se) {
			v := binary.LittleEndian.AppendUint64(nil, uint64(total))
			v = append(v, 0)
			for i := 0; i < total; i++ {
				f := byte(1)
				if i < len(se.Failed) && !se.Failed[i] {
					f = 0
				}
				v = append(v, f)
			}
			if se.Timeout {
				return append(v, describeCommands(cmds)+": "+se.Msg...), nil
			}
			return append(v, se.Msg...), nil
		}
		return fail(-1, err.Error()), nil
	}
	kids, err := awaitChildRoot(portName, start.Add(timeout))
	_ = ClosePort(portName) // a child that comes later finds nobody and fails its Init
	if err != nil {
		return fail(-1, fmt.Sprintf("%s: no child connected within %v (Info %q or %s sets this bound): %v; %s",
			describeCommands(cmds), timeout, infoTimeout, EnvSpawnTimeout, err, spawnHint)), nil
	}
	v := binary.LittleEndian.AppendUint64(nil, uint64(total))
	return append(v, 1), kids
}

// acceptOn is CommAccept's root half, for a port this process opened.
func acceptOn(op, portName string, msg []byte) ([]byte, error) {
	ports.Lock()
	p := ports.m[portName]
	ports.Unlock()
	if p == nil {
		return nil, errorf(ErrPort, op, "port %q is not open in this process", portName)
	}
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return nil, errorf(ErrPort, op, "port %q: %v", portName, err)
		}
		other, err := servePort(c, p.token, msg)
		c.Close()
		if err == errNotClient {
			continue
		}
		return other, err
	}
}

// connectParent runs in a spawned process's Init: the children's world
// connects to the port its parents' root passed (CommGetParent's
// intercommunicator).
func (r *runtime) connectParent() error {
	const op = "MPI_Init"
	if !r.pmi.Spawned() {
		return nil
	}
	portName, err := r.pmi.Get(pmi.PreputParentPort)
	if err != nil {
		return errorf(ErrSpawn, op, "spawned, but the launcher gave no parent port: %v", err)
	}
	c, err := joinGroups(op, r.world, 0, func(msg []byte) ([]byte, error) {
		return dialPort(op, portName, msg)
	}, "MPI_COMM_PARENT")
	if err != nil {
		return err
	}
	parent.Store(c)
	return nil
}

var universe struct {
	once sync.Once
	n    int
}

// universeSize is MPI_UNIVERSE_SIZE: what the launcher says (mpirun
// -usize, else its slots), or the world's size.
func (r *runtime) universeSize() int {
	universe.once.Do(func() {
		universe.n = r.size
		if n, err := r.pmi.UniverseSize(); err == nil && n > 0 {
			universe.n = n
		}
	})
	return universe.n
}
