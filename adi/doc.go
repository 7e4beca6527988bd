// Package adi is the abstract device interface: the contract between the
// portable MPI core (package mpi) and the devices that move bytes
// (devices/netvm, ...), and the registry through which devices make
// themselves known. A device registers a Factory under its name in an init
// function, and the core picks one by name when a job starts (ADIMPI_DEVICE,
// or mpirun -device). The core's code never names a device: its one edge
// towards them is a blank import of package devices, which links every
// device into every program so that any device can be picked at launch.
// Devices never import the core.
//
// # Who does what
//
// The core owns communicators, groups, datatypes, collectives, error classes
// and the Request objects. It checks every argument before a device sees it,
// translates communicator ranks to world ranks, and gives every communicator
// context ids. A device sees only envelopes (context id, world source rank,
// tag) and data descriptors; it never interprets a context id.
//
// A device owns how envelopes and bytes move between processes: its wire
// protocol, flow control, buffering of unexpected messages, and MPI matching.
// Matching must follow MPI's rules — non-overtaking per (source, context),
// wildcard source and tag, the earliest posted receive wins — and package
// adi/match implements them once for every device that matches at the
// receiver.
//
// # Calls and concurrency
//
// The core serialises all calls into a device under one lock, except Sleep,
// which it calls without the lock so that other goroutines can post
// operations while one waits. A device must therefore make Sleep safe against
// concurrent Progress calls, and must wake sleepers (Wake) when something
// local completes a request.
//
// # Buffers
//
// A send's Buffer belongs to the device from Isend until the request
// completes; the core does not touch it (and the user must not change it).
// A receive's Buffer belongs to the device from Irecv until completion or a
// successful CancelRecv; the device must write nothing outside the bytes
// the Buffer describes, even when the message is longer (truncation), and it
// reports the truncation in the request's Status as Truncated(...), which
// keeps the message's envelope for the core to restate in the program's
// terms (a type-signature mismatch likewise as Mismatched(...)).
//
// # Completion and progress
//
// A device completes a request by calling Request.Complete exactly once. It
// makes progress only inside Progress (or a goroutine it owns), never
// behind the core's back by calling into the core. Waiting is the core's
// loop: Seq, then Progress, and if nothing completed Sleep(seq, ...) — a
// device sleeps on a futex or eventfd and returns early when its sequence
// word moves, so that 16 ranks on 2 cores do not spin against each other.
//
// # Optional capabilities
//
// A device may offer more than Device; the core looks for each by type
// assertion when it starts the device and uses it where it helps:
// Board (collectives on shared memory, netvm), Multisender (one send to
// several destinations, fm's multidestination streams, for Bcast),
// ShortSender (a blocking send of a small contiguous message put on the
// wire at once, with no request: fm and netvm, for every blocking Send) and
// LockedCompleter (the device completes requests only inside the core's
// calls, so a blocking call's request may complete without an atomic
// store, Request.Held: fm and netvm).
//
// # Failure
//
// A device returns errors and never panics on bad input or a dead peer. When a
// peer that a pending request depends on has died, Progress fails that request
// with ErrOther (naming the peer) rather than waiting for ever.
package adi
