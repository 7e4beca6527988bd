// Package wire carries a device's frames between processes on different
// hosts over TCP: the network half of a device whose same-host peers talk
// through shared memory.
//
// An Endpoint listens on one address of its host and keeps at most one
// connection per peer that it talks to, opened lazily by whichever side
// sends first (a job of 64 ranks where each talks to two neighbours opens
// 64 connections, not 64²). Every connection is authenticated before any
// frame on it is believed: both sides prove knowledge of the job's secret
// with an HMAC-SHA256 challenge–response over fresh nonces, so a process
// without the secret can neither inject frames nor pose as a rank. A
// connection that fails the handshake is closed and counted, never trusted.
//
// A frame is a device-defined head (a few dozen bytes: the device's control
// message) and an optional body (message data). Frames to one peer arrive in
// the order they were sent. Sockets are non-blocking and driven by the
// device's Progress (Endpoint.Poll): no goroutine sits between the network
// and the device on the path of a message. A send writes head and body with
// one writev when the socket takes them, and keeps a reference to the body
// (never a copy) until the kernel has it all; the device learns that through
// Handler.Sent. A waiter with nothing to do sleeps in epoll (Endpoint.Wait),
// which Endpoint.Wake interrupts.
//
// A peer whose connection breaks (reset, closed, host gone) is reported
// once through Handler.Lost; the device then fails what depends on it.
package wire
