// Package dmcs is a one-sided remote-service-request layer over MPI, after
// DMCS (the Data Movement and Control Substrate of "One-Sided Communication
// Over MPI-1", Dobbelaere and Chrisochoides): a process asks another to run
// a handler, to store or fetch bytes of its memory, to combine values into
// it, or to allocate and free memory for it, without the other process
// posting a receive for any of it.
//
// Handlers are functions registered on every process in the same order,
// which makes each a small integer (Register). RSR(dest, h, args...) asks
// dest to run handler h with 0 to 4 word arguments; RSRPayload adds a byte
// payload. Put, Get and PutOp (a remote accumulate) move bytes between this
// process's memory and a remote Ptr — memory the owner registered with
// Expose or that a peer allocated there with Malloc — synchronously, or
// asynchronously with a Counter that counts completed operations.
//
// Requests are served when the target polls: by explicit calls of Poll
// (the seed's single-threaded model), or by a polling goroutine that
// Options.PollThread starts (its multi-threaded model), which polls for a
// while after each request and then sleeps on a doorbell that senders
// ring. A process waiting for its own
// synchronous operation serves every request that reaches it meanwhile, so
// two processes asking each other never deadlock. Handlers run inside the
// poll; the rule that keeps this deadlock-free is the seed's: a handler
// must not block (no synchronous DMCS call, no blocking MPI call), but it
// may send requests of its own (RSR, RSRPayload, PutAsync, GetAsync,
// PutOpAsync), replies included.
//
// Between processes of one host a request is a record in a
// single-producer ring in the target's shared memory (an MPI shared
// window, WinAllocateShared over the host's processes): one store
// publishes it, and the target's poll reads it without an MPI call.
// Towards other hosts (or with Options.NoShm) requests are MPI
// point-to-point messages on a duplicate of the communicator DMCS was
// started on: a fixed-size header with payloads up to InlineMax bytes in
// the same message. Larger payloads (over RingMax in a ring, InlineMax in
// a message) follow as a message of their own received straight into the
// destination memory. With Options.Heap each process also has a heap in
// an MPI window (HeapAlloc; Malloc uses it when it has room): Put, Get and
// PutOp of heap memory on the same host are MPI_Put, MPI_Get and
// MPI_Accumulate, which the target does not serve at all. The package
// uses only package mpi (and a futex for its doorbell), never a device,
// so it runs on every device and across hosts. docs/dmcs.md has the cost
// per call.
package dmcs
