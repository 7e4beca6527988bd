// Package interjob carries MPI messages between processes of different
// jobs — a parent and the children it spawned, two jobs joined by
// MPI_Comm_connect/MPI_Comm_accept or MPI_Comm_join — whatever device each
// job runs on. The devices wire up a fixed world at Init (shared-memory
// segments, rings and boards sized for it); a process of another job has
// none of those, so the core sends every message of a communicator that
// spans jobs through a Net instead: TCP (loopback on one host, the
// network across hosts), one connection per ordered pair of processes that
// talk, eager messages matched at the receiver by package adi/match.
//
// A process is named by an Identity (its job and its rank in that job's
// world) and reached through a Peer: its identity, its listening address
// and a token. The token is a capability: a connection is accepted only
// when its greeting carries the listener's token, and a process learns a
// peer's token only through an exchange it took part in (a spawn, an
// accept or connect, a join), never from the network.
//
// The Net numbers the processes it knows as the core does: a process of
// this job keeps its world rank, a process of another job gets the next
// number from the world size up, the first time it is seen (its address,
// or a message from it). Reader goroutines, one per incoming connection,
// hand whole frames to the Net and ring the device's doorbell (the wake
// function); everything else runs under the core's lock, in the calls the
// core makes (Isend, Irecv, Iprobe, CancelRecv, Progress), as in a device.
package interjob
