package adi

// RemoteMemory is an optional device capability for one-sided
// communication (MPI-3 RMA), the extended ADI of "DMPI" (remote memory
// access built on a network's remote write and read): this process reads
// and writes a peer's memory directly, without the peer's help. netvm
// offers it for peers on its own host where process_vm_writev/readv is
// permitted (NetVM's remote write and read); via offers it for every peer
// with RDMA write and read descriptors into memory the target registered
// with its NIC.
//
// A window's memory is exposed by its owner (ExposeMemory) when the window
// is made; the key that returns travels to the other ranks with the
// window's address, and they name the memory by (key, address). The core
// moves the data of MPI_Put and MPI_Get to and from a window whose target
// it can reach this way with these calls, in one call per contiguous
// piece, and completes them at once: the target need not call MPI. Every
// call returns once the data is in place (written at the target, read
// here). Everything else (accumulates, which must be atomic, locks, and
// every operation towards a peer the device cannot reach) travels as
// point-to-point messages that the target's progress engine carries out:
// the core's generic RMA agent, which needs nothing more than Device.
type RemoteMemory interface {
	// RemoteAccess reports whether this process may read and write the
	// memory of world rank p with RemoteRead and RemoteWrite.
	RemoteAccess(p int) bool
	// ExposeMemory makes mem, this process's memory, reachable by the
	// peers' RemoteWrite and RemoteRead until UnexposeMemory(key) and
	// returns the key they pass to name it (via: the registration's memory
	// handle; 0 where the device needs none). mem is not empty.
	ExposeMemory(mem []byte) (key uint64, err error)
	// UnexposeMemory ends what ExposeMemory(…) = key began.
	UnexposeMemory(key uint64) error
	// RemoteWrite copies src into world rank p's memory at address addr of
	// p's address space, inside the memory p exposed as key.
	RemoteWrite(p int, key uint64, addr uintptr, src []byte) error
	// RemoteRead copies len(dst) bytes of world rank p's memory, at address
	// addr of p's address space inside the memory p exposed as key, into
	// dst.
	RemoteRead(p int, key uint64, addr uintptr, dst []byte) error
}

// The error classes of one-sided communication. They are numbered apart
// from the point-to-point classes so that either list can grow.
const (
	ErrWin         Class = iota + 64 // MPI_ERR_WIN: an invalid or freed window
	ErrBase                          // MPI_ERR_BASE: an invalid base (memory) argument
	ErrSize                          // MPI_ERR_SIZE: an invalid size argument
	ErrDisp                          // MPI_ERR_DISP: an invalid displacement or displacement unit
	ErrLocktype                      // MPI_ERR_LOCKTYPE: an invalid lock type
	ErrAssert                        // MPI_ERR_ASSERT: an invalid assertion
	ErrRMAConflict                   // MPI_ERR_RMA_CONFLICT: conflicting epochs or accesses
	ErrRMASync                       // MPI_ERR_RMA_SYNC: a call outside the epoch it needs
	ErrRMARange                      // MPI_ERR_RMA_RANGE: a target access outside the window
	ErrRMAAttach                     // MPI_ERR_RMA_ATTACH: memory cannot be attached (or detached)
	ErrRMAShared                     // MPI_ERR_RMA_SHARED: memory cannot be shared among the ranks
	ErrRMAFlavor                     // MPI_ERR_RMA_FLAVOR: the call does not fit the window's flavor
)

func init() {
	for c, n := range map[Class]string{
		ErrWin: "MPI_ERR_WIN", ErrBase: "MPI_ERR_BASE", ErrSize: "MPI_ERR_SIZE",
		ErrDisp: "MPI_ERR_DISP", ErrLocktype: "MPI_ERR_LOCKTYPE", ErrAssert: "MPI_ERR_ASSERT",
		ErrRMAConflict: "MPI_ERR_RMA_CONFLICT", ErrRMASync: "MPI_ERR_RMA_SYNC",
		ErrRMARange: "MPI_ERR_RMA_RANGE", ErrRMAAttach: "MPI_ERR_RMA_ATTACH",
		ErrRMAShared: "MPI_ERR_RMA_SHARED", ErrRMAFlavor: "MPI_ERR_RMA_FLAVOR",
	} {
		classNames[c] = n
	}
}
