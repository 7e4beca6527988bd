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
// Options.PollThread starts (its multi-threaded model), which sleeps in
// MPI's wait while nothing arrives. A process waiting for its own
// synchronous operation serves every request that reaches it meanwhile, so
// two processes asking each other never deadlock. Handlers run inside the
// poll; the rule that keeps this deadlock-free is the seed's: a handler
// must not block (no synchronous DMCS call, no blocking MPI call), but it
// may send requests of its own (RSR, RSRPayload, PutAsync, GetAsync,
// PutOpAsync), replies included.
//
// Everything travels as MPI point-to-point messages on a duplicate of the
// communicator DMCS was started on: one fixed-size header per request,
// with payloads up to InlineMax bytes in the same message and larger ones
// in a second message received straight into the destination memory (a
// Put's target, a Get's buffer). The package uses only package mpi, never
// a device, so it runs on every device and across hosts. docs/dmcs.md has
// the cost per call and what will move onto MPI RMA windows once the core
// has them.
package dmcs
