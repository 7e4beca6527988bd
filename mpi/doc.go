// Package mpi is adimpi's public API: MPI for Go programs, with no C
// toolchain. A program calls Init, works with communicators (World), sends
// and receives typed slices, and calls Finalize:
//
//	if err := mpi.Init(); err != nil {
//		log.Fatal(err)
//	}
//	defer mpi.Finalize()
//	world := mpi.World()
//	if world.Rank() == 0 {
//		err = mpi.Send(world, []float64{1, 2, 3}, 1, 7)
//	}
//
// Run it with mpirun (go run ./cmd/mpirun -np 4 ./prog), or under any
// launcher that speaks PMI-1, such as MPICH's Hydra mpiexec. The device that
// moves the bytes is chosen when the job starts: mpirun -device, or the
// environment variable ADIMPI_DEVICE (default netvm); device options come
// from mpirun -device-opt key=value or ADIMPI_DEVICE_OPT="k=v,k=v".
//
// Every call returns an error carrying an MPI error class (ErrRank, ErrTag,
// ErrTruncate, ...), testable with errors.Is. Bad arguments are reported and
// never crash the job, unless the communicator's (a window's: its own)
// error handler says so (Comm.SetErrhandler, Win.SetErrhandler:
// ErrorsAreFatal, or a function of the program's). A
// rank that panics with Finalize deferred ends the job (see Finalize).
//
// # Groups, communicators and collectives
//
// Groups (Group, from Comm.Group) are immutable ordered sets of processes;
// Dup, Split, SplitType, Create and CreateGroup make new communicators, each
// with its own pair of context ids (point-to-point and collective) agreed by
// its members, and Free returns the pair for reuse. The collectives (Barrier,
// Bcast, Gather(v), Scatter(v), Allgather(v), Alltoall(v), Reduce,
// Allreduce, ReduceScatter(Block), Scan, Exscan, and the neighbourhood
// collectives on Cartesian and graph topologies) come in generic forms on
// slices, *Buf forms on Buffers and non-blocking I... forms that return a
// Request; see Barrier for the rules they share and InPlace for
// MPI_IN_PLACE. A non-blocking collective runs in its own goroutine, which
// drives the device while the caller computes; the persistent forms
// (BcastInit, AllreduceInit, ...) return a request that Start runs again and
// again. Idup duplicates a communicator in the background. The collectives
// also work on intercommunicators (IntercommCreate), with MPI's semantics
// (see Root).
//
// Calls may be made from several goroutines at once: the runtime serialises
// them internally (MPI_THREAD_MULTIPLE by a single lock), and a goroutine
// blocked in Wait sleeps without holding it.
package mpi
