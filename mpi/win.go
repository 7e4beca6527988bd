package mpi

import (
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"sync/atomic"
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/internal/shm"
)

// The error classes of one-sided communication, testable with errors.Is.
const (
	ErrWin         = adi.ErrWin         // MPI_ERR_WIN: nil or freed window
	ErrBase        = adi.ErrBase        // MPI_ERR_BASE: bad memory argument
	ErrSize        = adi.ErrSize        // MPI_ERR_SIZE: bad size
	ErrDisp        = adi.ErrDisp        // MPI_ERR_DISP: bad displacement or displacement unit
	ErrLocktype    = adi.ErrLocktype    // MPI_ERR_LOCKTYPE: bad lock type
	ErrAssert      = adi.ErrAssert      // MPI_ERR_ASSERT: bad assertion
	ErrRMAConflict = adi.ErrRMAConflict // MPI_ERR_RMA_CONFLICT: conflicting epochs
	ErrRMASync     = adi.ErrRMASync     // MPI_ERR_RMA_SYNC: no epoch for the call
	ErrRMARange    = adi.ErrRMARange    // MPI_ERR_RMA_RANGE: outside the target window
	ErrRMAAttach   = adi.ErrRMAAttach   // MPI_ERR_RMA_ATTACH: cannot attach or detach
	ErrRMAShared   = adi.ErrRMAShared   // MPI_ERR_RMA_SHARED: memory cannot be shared
	ErrRMAFlavor   = adi.ErrRMAFlavor   // MPI_ERR_RMA_FLAVOR: wrong window flavor for the call
)

// WinFlavor is how a window's memory came to be (MPI_WIN_CREATE_FLAVOR).
type WinFlavor int

// The window flavors.
const (
	FlavorCreate   WinFlavor = iota + 1 // WinCreate: the program's memory
	FlavorAllocate                      // WinAllocate: memory MPI allocated
	FlavorDynamic                       // WinCreateDynamic: memory attached later
	FlavorShared                        // WinAllocateShared: memory every rank of the host maps
)

func (f WinFlavor) String() string {
	switch f {
	case FlavorCreate:
		return "MPI_WIN_FLAVOR_CREATE"
	case FlavorAllocate:
		return "MPI_WIN_FLAVOR_ALLOCATE"
	case FlavorDynamic:
		return "MPI_WIN_FLAVOR_DYNAMIC"
	case FlavorShared:
		return "MPI_WIN_FLAVOR_SHARED"
	}
	return fmt.Sprintf("WinFlavor(%d)", int(f))
}

// WinModel is a window's memory model (MPI_WIN_MODEL). adimpi's windows are
// all unified: the program's own loads and stores and RMA operations act on
// one copy of the memory, and what an epoch's synchronisation completed is
// visible to both.
type WinModel int

// The memory models.
const (
	ModelSeparate WinModel = iota + 1 // MPI_WIN_SEPARATE (never used by adimpi)
	ModelUnified                      // MPI_WIN_UNIFIED
)

// Assertions (MPI_MODE_*) that Fence, Post, Start, Lock and LockAll accept;
// they may be or'ed together. adimpi uses NoCheck to skip the handshake of
// Start and Lock, and NoPrecede and NoSucceed to skip Fence's flush and
// barrier work where it can; the others are accepted and checked for the
// calls they belong to.
const (
	ModeNoCheck   = 1 << iota // MPI_MODE_NOCHECK: the matching Post has run / no conflicting lock exists
	ModeNoStore               // MPI_MODE_NOSTORE: no local stores since the last sync
	ModeNoPut                 // MPI_MODE_NOPUT: no puts or accumulates to this rank until the next sync
	ModeNoPrecede             // MPI_MODE_NOPRECEDE: the fence ends no epoch with operations
	ModeNoSucceed             // MPI_MODE_NOSUCCEED: the fence starts no epoch
)

// Lock types for Lock.
const (
	LockExclusive = 1 // MPI_LOCK_EXCLUSIVE
	LockShared    = 2 // MPI_LOCK_SHARED
)

// Win is an RMA window (MPI_Win): memory of every rank of a communicator
// that the others may read and write with Put, Get and the accumulates,
// inside epochs opened and closed by Fence, PSCW (Post/Start/Complete/Wait)
// or passive-target locks. See docs/rma.md.
type Win struct {
	rt       *runtime
	comm     *Comm // the window's own communicator: a duplicate of the creator's
	name     string
	flavor   WinFlavor
	mem      []byte // this rank's window memory (nil for a dynamic window)
	dispUnit int
	info     *Info // a copy of the hints the window was made with
	hints    winHints

	// Per communicator rank: the window's address, size and displacement
	// unit there, and how this process reaches it.
	bases   []uintptr
	sizes   []int
	units   []int
	direct  [][]byte // memory of that rank mapped here (shared windows; this rank's own), else nil
	remote  []bool   // the device reads and writes that rank's memory (adi.RemoteMemory)
	keys    []uint64 // the key that rank's memory is exposed by (adi.RemoteMemory.ExposeMemory)
	rm      adi.RemoteMemory
	key     uint64 // this rank's memory is exposed by key (if exposed)
	exposed bool
	segs    []*shm.Segment // allocated windows: the segments this rank maps (its own first)
	ctls    []*winCtl      // allocated windows: the control blocks of the ranks whose segments this rank maps
	// allMapped: every rank maps every other's memory (an allocated or
	// shared window on one host), so no operation needs a target's agent.
	allMapped bool
	// asked: some origin reaches this rank's memory through its agent (a
	// dynamic window, a peer on another host, a device without remote
	// memory access), so the agent must answer while this rank waits.
	asked   bool
	selfOps atomic.Uint32 // fast-path operations on this rank's own memory (see mapped)

	regions []region // dynamic windows: the memory attached here

	ag     agent // the target side (rma_agent.go)
	origin originState
	freed  bool

	attrs attrs[*WinKeyval]          // cached attributes (SetAttr, Attr: win_attr.go)
	eh    atomic.Pointer[Errhandler] // the error handler; nil: ErrorsReturn
}

// region is memory attached to a dynamic window.
type region struct {
	addr uintptr
	mem  []byte
}

// winStart checks MPI runs and w is a live window.
func winStart(op string, w *Win) (*runtime, error) {
	if w == nil {
		return nil, errorf(ErrWin, op, "window is nil (MPI_WIN_NULL)")
	}
	if w.freed {
		return nil, errorf(ErrWin, op, "window %s has been freed", w.name)
	}
	r, err := current(op)
	if err != nil {
		return nil, err
	}
	return r, nil
}

var winCount atomic.Int64

// newWin makes the window's communicator and exchanges every rank's base,
// size and displacement unit. It is collective over c.
func newWin(op string, c *Comm, mem []byte, dispUnit int, flavor WinFlavor, info *Info) (*Win, error) {
	r, err := collStart(op, c)
	if err != nil {
		return nil, err
	}
	if dispUnit <= 0 {
		return nil, errorf(ErrDisp, op, "displacement unit %d is not positive", dispUnit)
	}
	var hints winHints
	if info != nil {
		if err := info.use(op); err != nil {
			return nil, err
		}
		hints, err = parseHints(op, info)
		info.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if info, err = info.Dup(); err != nil {
			return nil, named(op, err)
		}
	}
	// The window's communicator is for its own traffic: neither c's
	// attributes (their Copy callbacks would run) nor its error handler.
	wc, err := c.dupBare()
	if err != nil {
		return nil, named(op, err)
	}
	wc.eh.Store(nil)
	wc.name = c.name + "/win"
	n := wc.Size()
	w := &Win{rt: r, comm: wc, flavor: flavor, mem: mem, dispUnit: dispUnit, info: info, hints: hints,
		name: fmt.Sprintf("win%d", winCount.Add(1))}
	// This rank's memory is exposed to the device's remote memory access
	// (registered, for via's RDMA) before the others learn its address; a
	// rank whose memory cannot be exposed is reached through its agent.
	w.rm = remoteMemory(r)
	reachable := uint64(0)
	if w.rm != nil && flavor != FlavorDynamic {
		reachable = 1
		if len(mem) > 0 {
			r.mu.Lock()
			key, err := w.rm.ExposeMemory(mem)
			r.mu.Unlock()
			if err == nil {
				w.key, w.exposed = key, true
			} else {
				reachable = 0
			}
		}
	}
	const words = 5
	mine := []uint64{uint64(addrOf(mem)), uint64(len(mem)), uint64(dispUnit), w.key, reachable}
	all := make([]uint64, words*n)
	if err := allgatherBuf(wc, Slice(mine), Slice(all)); err != nil {
		w.unexpose()
		return nil, named(op, err)
	}
	w.bases, w.sizes, w.units = make([]uintptr, n), make([]int, n), make([]int, n)
	w.direct, w.remote, w.keys = make([][]byte, n), make([]bool, n), make([]uint64, n)
	r.mu.Lock()
	for i := range n {
		a := all[words*i:]
		w.bases[i], w.sizes[i], w.units[i], w.keys[i] = uintptr(a[0]), int(a[1]), int(a[2]), a[3]
		w.remote[i] = w.rm != nil && a[4] == 1 && i != wc.rank && r.inJob(wc.world[i]) && w.rm.RemoteAccess(wc.world[i])
	}
	r.mu.Unlock()
	if err := w.checkHints(op); err != nil {
		w.unexpose()
		wc.free()
		return nil, err
	}
	w.direct[wc.rank] = mem
	w.ctls = make([]*winCtl, n)
	w.origin.init(n)
	return w, nil
}

// remoteMemory is the device's remote memory access, if it has it: the
// device under the core's wrapper for communicators across jobs (join.go),
// which RMA bypasses as windows reach it only for ranks of this job.
func remoteMemory(r *runtime) adi.RemoteMemory {
	dev := r.dev
	if r.join != nil {
		dev = r.join.Device
	}
	rm, _ := dev.(adi.RemoteMemory)
	return rm
}

// inJob reports whether world rank wr is a rank of this job (not of
// another job joined by a communicator).
func (r *runtime) inJob(wr int) bool { return wr >= 0 && wr < r.size }

// sameHost reports whether world rank wr is a rank of this job on this
// rank's host.
func (r *runtime) sameHost(wr int) bool {
	return r.inJob(wr) && (r.hosts == nil || r.hosts[wr] == r.hosts[r.rank])
}

// start runs the window's agent: from here on peers may reach it.
func (w *Win) start() error {
	r := w.rt
	r.mu.Lock()
	err := w.ag.start(w)
	r.mu.Unlock()
	return err
}

// WinCreate makes a window of the program's memory base on every rank of
// c (MPI_Win_create), with displacements counted in elements of T. It is
// collective over c. base must stay alive and unmoved until Free, which
// Go's heap guarantees for a slice the program keeps.
func WinCreate[T Numeric](c *Comm, base []T, info *Info) (*Win, error) {
	b := Slice(base)
	return WinCreateBuf(c, b.Mem, b.Type.Size(), info)
}

// WinCreateBuf is WinCreate for bytes with an explicit displacement unit.
func WinCreateBuf(c *Comm, base []byte, dispUnit int, info *Info) (*Win, error) {
	w, err := winCreate("MPI_Win_create", c, base, dispUnit, FlavorCreate, info)
	return w, c.raise(err)
}

func winCreate(op string, c *Comm, base []byte, dispUnit int, flavor WinFlavor, info *Info) (*Win, error) {
	seg, err := shm.Export("adimpi-winctl", ctlSize)
	if err != nil {
		return nil, errorf(ErrOther, op, "allocating the window's control block: %v", err)
	}
	w, err := newWin(op, c, base, dispUnit, flavor, info)
	if err != nil {
		seg.Close()
		return nil, err
	}
	if err := w.mapSegments(op, seg); err != nil {
		return nil, err
	}
	return w, nil
}

// WinAllocate allocates n elements of T on every rank of c and makes a
// window of them (MPI_Win_allocate); it returns the window and this rank's
// memory. It is collective over c.
func WinAllocate[T Numeric](c *Comm, n int, info *Info) (*Win, []T, error) {
	const op = "MPI_Win_allocate"
	if n < 0 {
		return nil, nil, c.raise(errorf(ErrSize, op, "size %d is negative", n))
	}
	var z T
	es := int(unsafe.Sizeof(z))
	w, mem, err := winSegment(op, c, n*es, es, FlavorAllocate, info)
	if err != nil {
		return nil, nil, c.raise(err)
	}
	return w, asSlice[T](mem), nil
}

// WinAllocateBytes is WinAllocate for size bytes with an explicit
// displacement unit.
func WinAllocateBytes(c *Comm, size, dispUnit int, info *Info) (*Win, []byte, error) {
	w, mem, err := winSegment("MPI_Win_allocate", c, size, dispUnit, FlavorAllocate, info)
	return w, mem, c.raise(err)
}

// WinCreateDynamic makes a window without memory (MPI_Win_create_dynamic):
// each rank attaches memory with Attach, and origins address it by the
// absolute address Attach returns, displacement unit 1. It is collective
// over c.
func WinCreateDynamic(c *Comm, info *Info) (*Win, error) {
	w, err := winCreate("MPI_Win_create_dynamic", c, nil, 1, FlavorDynamic, info)
	return w, c.raise(err)
}

// Attach attaches mem to a dynamic window (MPI_Win_attach) and returns the
// displacement that addresses its first byte from any origin (its
// address, MPI_Get_address). It is local; the program passes the address
// to the origins itself.
func (w *Win) Attach(mem []byte) (int, error) {
	const op = "MPI_Win_attach"
	r, err := winStart(op, w)
	if err != nil {
		return 0, w.raise(err)
	}
	if w.flavor != FlavorDynamic {
		return 0, w.raise(errorf(ErrRMAFlavor, op, "window %s is of flavor %s, not dynamic", w.name, w.flavor))
	}
	if len(mem) == 0 {
		return 0, w.raise(errorf(ErrRMAAttach, op, "memory of 0 bytes cannot be attached"))
	}
	a := addrOf(mem)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range w.regions {
		if a < g.addr+uintptr(len(g.mem)) && g.addr < a+uintptr(len(mem)) {
			return 0, w.raise(errorf(ErrRMAAttach, op, "memory [%#x, %#x) overlaps memory attached at %#x", a, a+uintptr(len(mem)), g.addr))
		}
	}
	w.regions = append(w.regions, region{addr: a, mem: mem})
	sort.Slice(w.regions, func(i, j int) bool { return w.regions[i].addr < w.regions[j].addr })
	return int(a), nil
}

// Detach detaches memory that Attach attached (MPI_Win_detach), given by
// the same slice.
func (w *Win) Detach(mem []byte) error {
	const op = "MPI_Win_detach"
	r, err := winStart(op, w)
	if err != nil {
		return w.raise(err)
	}
	if w.flavor != FlavorDynamic {
		return w.raise(errorf(ErrRMAFlavor, op, "window %s is of flavor %s, not dynamic", w.name, w.flavor))
	}
	a := addrOf(mem)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, g := range w.regions {
		if g.addr == a {
			w.regions = append(w.regions[:i], w.regions[i+1:]...)
			return nil
		}
	}
	return w.raise(errorf(ErrRMAAttach, op, "memory at %#x is not attached to window %s", a, w.name))
}

// WinAllocateShared allocates n elements of T on every rank of c in shared
// memory that every rank of c maps (MPI_Win_allocate_shared), so that they
// load and store each other's window memory directly (WinSharedQuery).
// Every rank of c must run on one host, else the error is ErrRMAShared.
// Each rank's memory is a segment of its own (as with the info key
// alloc_shared_noncontig): query each rank's with WinSharedQuery.
func WinAllocateShared[T Numeric](c *Comm, n int, info *Info) (*Win, []T, error) {
	var z T
	w, mem, err := winAllocateShared("MPI_Win_allocate_shared", c, n*int(unsafe.Sizeof(z)), int(unsafe.Sizeof(z)), info)
	if err != nil {
		return nil, nil, c.raise(err)
	}
	return w, asSlice[T](mem), nil
}

// WinAllocateSharedBytes is WinAllocateShared for size bytes with an
// explicit displacement unit.
func WinAllocateSharedBytes(c *Comm, size, dispUnit int, info *Info) (*Win, []byte, error) {
	w, mem, err := winAllocateShared("MPI_Win_allocate_shared", c, size, dispUnit, info)
	return w, mem, c.raise(err)
}

func winAllocateShared(op string, c *Comm, size, dispUnit int, info *Info) (*Win, []byte, error) {
	return winSegment(op, c, size, dispUnit, FlavorShared, info)
}

// ctlSize is the window's control block at the start of its segment, before
// the memory (if MPI allocated it): the words that origins on this host use
// to take the window's locks and to carry out accumulates themselves
// (winCtl, win_lock.go).
const ctlSize = 64

// winSegment makes a window whose memory MPI allocates (WinAllocate,
// WinAllocateShared): each rank's memory is a shared-memory segment that
// the other ranks of its host map, so that they put, get, accumulate and
// lock there themselves, without the owner's help. With FlavorShared every
// rank of c must be on this host and map every other's; otherwise a peer
// whose segment cannot be mapped is reached through its agent.
func winSegment(op string, c *Comm, size, dispUnit int, flavor WinFlavor, info *Info) (*Win, []byte, error) {
	r, err := collStart(op, c)
	if err != nil {
		return nil, nil, err
	}
	if size < 0 {
		return nil, nil, errorf(ErrSize, op, "size %d is negative", size)
	}
	if flavor == FlavorShared {
		for i, wr := range c.world {
			if !r.inJob(wr) {
				return nil, nil, errorf(ErrRMAShared, op, "rank %d of %s runs in another job: shared memory needs one host", i, c.name)
			}
			if !r.sameHost(wr) {
				return nil, nil, errorf(ErrRMAShared, op, "rank %d of %s runs on host %s, this rank on %s: shared memory needs one host", i, c.name, r.hostNames[r.hosts[wr]], r.hostNames[r.hosts[r.rank]])
			}
		}
	}
	seg, err := shm.Export("adimpi-win", ctlSize+size)
	if err != nil {
		return nil, nil, errorf(ErrOther, op, "allocating %d bytes of shared memory: %v", size, err)
	}
	at := shm.HeaderSize + ctlSize
	mem := seg.Mem[at : at+size : at+size]
	w, err := newWin(op, c, mem, dispUnit, flavor, info)
	if err != nil {
		seg.Close()
		return nil, nil, err
	}
	if err := w.mapSegments(op, seg); err != nil {
		return nil, nil, err
	}
	return w, mem, nil
}

// mapSegments maps, from every other rank of this host, the segment that
// holds its control block (and, for an allocated window, its memory after
// the block), exchanging seg, this rank's, for theirs; then starts
// the agent and waits until every rank's has. A peer whose segment cannot
// be mapped is reached through its agent, except in a shared window, which
// fails. On failure every segment is unmapped.
func (w *Win) mapSegments(op string, seg *shm.Segment) error {
	r := w.rt
	w.segs = []*shm.Segment{seg}
	n := w.comm.Size()
	w.ctls[w.comm.rank] = ctlOf(seg)
	mine := []uint64{uint64(os.Getpid()), uint64(seg.FD), seg.Key}
	all := make([]uint64, 3*n)
	if err := allgatherBuf(w.comm, Slice(mine), Slice(all)); err != nil {
		w.closeSegs()
		return named(op, err)
	}
	at := shm.HeaderSize + ctlSize
	for i := range n {
		if i == w.comm.rank || !r.sameHost(w.comm.world[i]) {
			continue
		}
		s, err := shm.Import(int(all[3*i]), int(all[3*i+1]), all[3*i+2])
		if err != nil && w.flavor == FlavorShared {
			w.closeSegs()
			return errorf(ErrRMAShared, op, "mapping rank %d's window memory: %v", i, err)
		}
		if err != nil {
			continue // reached through its agent
		}
		w.segs = append(w.segs, s)
		if w.flavor == FlavorAllocate || w.flavor == FlavorShared {
			w.direct[i] = s.Mem[at : at+w.sizes[i] : at+w.sizes[i]]
		}
		w.ctls[i] = ctlOf(s)
	}
	// Ask every rank how it reaches every other (the flavor is the same
	// on all): word i of the minimum is 1 if every origin reaches rank i
	// natively, word n if every rank maps every other's memory.
	ways, least := append(w.nativeTargets(), 1), make([]int64, n+1)
	for i := range n {
		if w.direct[i] == nil || w.ctls[i] == nil || w.flavor != FlavorAllocate && w.flavor != FlavorShared {
			ways[n] = 0
		}
	}
	if err := allreduceBuf(w.comm, Slice(ways), Slice(least), Min); err != nil {
		w.closeSegs()
		return named(op, err)
	}
	w.allMapped = least[n] == 1
	w.asked = least[w.comm.rank] == 0
	if err := w.start(); err != nil {
		w.closeSegs()
		return named(op, err)
	}
	// Every agent runs before any rank may target it.
	if err := barrierOn(w.comm); err != nil {
		return named(op, err)
	}
	return nil
}

// closeSegs unmaps the window's segments and ends the exposure of its
// memory to the device.
func (w *Win) closeSegs() {
	for _, s := range w.segs {
		s.Close()
	}
	w.segs = nil
	w.unexpose()
}

// unexpose ends the exposure of this rank's memory to the device's remote
// memory access (newWin's ExposeMemory), if there was one.
func (w *Win) unexpose() {
	if !w.exposed {
		return
	}
	w.exposed = false
	w.rt.mu.Lock()
	_ = w.rm.UnexposeMemory(w.key)
	w.rt.mu.Unlock()
}

// SharedQuery returns rank's window memory of a shared window, mapped in
// this process, and its displacement unit (MPI_Win_shared_query). Rank
// ProcNull gives the memory of the lowest rank whose size is not zero.
func (w *Win) SharedQuery(rank int) ([]byte, int, error) {
	const op = "MPI_Win_shared_query"
	if _, err := winStart(op, w); err != nil {
		return nil, 0, w.raise(err)
	}
	if w.flavor != FlavorShared {
		return nil, 0, w.raise(errorf(ErrRMAFlavor, op, "window %s is of flavor %s, not shared", w.name, w.flavor))
	}
	if rank == ProcNull {
		for i, s := range w.sizes {
			if s > 0 {
				return w.direct[i], w.units[i], nil
			}
		}
		return nil, w.dispUnit, nil
	}
	if rank < 0 || rank >= w.comm.Size() {
		return nil, 0, w.raise(errorf(ErrRank, op, "rank %d out of range [0,%d)", rank, w.comm.Size()))
	}
	return w.direct[rank], w.units[rank], nil
}

// WinSharedQuery is SharedQuery as a slice of T.
func WinSharedQuery[T Numeric](w *Win, rank int) ([]T, error) {
	mem, _, err := w.SharedQuery(rank)
	if err != nil {
		return nil, err
	}
	return asSlice[T](mem), nil
}

// Free frees the window (MPI_Win_free). It is collective; every epoch this
// rank opened must be closed, and it returns once every rank's operations
// on this rank's memory are complete.
func (w *Win) Free() error {
	const op = "MPI_Win_free"
	if _, err := winStart(op, w); err != nil {
		return w.raise(err)
	}
	if err := w.origin.idle(op, w); err != nil {
		return w.raise(err)
	}
	if err := w.ag.idle(op, w); err != nil {
		return w.raise(err)
	}
	if err := w.waitLocal(op, -1); err != nil {
		return w.raise(err)
	}
	// The attributes' Delete callbacks run first, as MPI says, while the
	// window is still usable; an error of theirs stops the Free.
	if err := dropAttrs(&w.attrs, w); err != nil {
		return w.raise(errorf(ErrOther, op, "attribute delete callback: %v", err))
	}
	// Once every rank is here, every origin has closed its epochs, which
	// completed its operations on this rank's memory.
	if err := barrierOn(w.comm); err != nil {
		return w.raise(named(op, err))
	}
	if err := w.ag.stop(op); err != nil {
		return w.raise(err)
	}
	w.freed = true
	w.closeSegs()
	return w.comm.free()
}

// Group returns the group of the communicator the window was created over
// (MPI_Win_get_group).
func (w *Win) Group() (*Group, error) {
	if _, err := winStart("MPI_Win_get_group", w); err != nil {
		return nil, w.raise(err)
	}
	return w.comm.Group()
}

// Name is the window's name (MPI_Win_get_name).
func (w *Win) Name() string {
	if w == nil {
		return "MPI_WIN_NULL"
	}
	return w.name
}

// SetName names the window (MPI_Win_set_name).
func (w *Win) SetName(name string) {
	if w != nil {
		w.name = name
	}
}

// Base is this rank's window memory (MPI_WIN_BASE); nil for a dynamic window.
func (w *Win) Base() []byte { return w.mem }

// Size is the size in bytes of this rank's window memory (MPI_WIN_SIZE).
func (w *Win) Size() int { return len(w.mem) }

// DispUnit is this rank's displacement unit (MPI_WIN_DISP_UNIT).
func (w *Win) DispUnit() int { return w.dispUnit }

// Flavor is how the window was made (MPI_WIN_CREATE_FLAVOR).
func (w *Win) Flavor() WinFlavor { return w.flavor }

// Model is the window's memory model (MPI_WIN_MODEL): always ModelUnified.
func (w *Win) Model() WinModel { return ModelUnified }

// Info returns the hints the window was made with (MPI_Win_get_info);
// an empty Info if none.
func (w *Win) Info() *Info {
	if w == nil || w.info == nil {
		return NewInfo()
	}
	i, err := w.info.Dup()
	if err != nil {
		return NewInfo()
	}
	return i
}

// Native reports whether one-sided operations towards rank need nothing
// of the target: Put, Get, the accumulates and the passive-target lock are
// carried out by this process, through shared memory (an allocated or
// shared window, or this rank itself) or the device's remote write and
// read (adi.RemoteMemory) under the lock words of the target's control
// block, which this process maps.
func (w *Win) Native(rank int) bool {
	if w == nil || rank < 0 || rank >= len(w.remote) {
		return false
	}
	return w.ctls[rank] != nil && (w.remote[rank] || w.direct[rank] != nil)
}

// nativeTargets reports, per rank of the window, 1 if this rank's
// one-sided operations on it need nothing of that rank (Native, or this
// rank itself, whose operations its own calls carry out), else 0.
func (w *Win) nativeTargets() []int64 {
	v := make([]int64, w.comm.Size())
	for t := range v {
		if t == w.comm.rank || w.Native(t) {
			v[t] = 1
		}
	}
	return v
}

// le is the byte order of RMA headers.
var le = binary.LittleEndian

// barrierOn is a barrier over c without c's error handler.
func barrierOn(c *Comm) error { return blockingPlan(barrierPlan("MPI_Barrier", c)) }

// allgatherBuf is AllgatherBuf without c's error handler.
func allgatherBuf(c *Comm, send, recv Buffer) error {
	return blockingPlan(allgatherPlan("MPI_Allgather", c, send, recv))
}
