// Package order has the two memory-ordering operations of the per-message
// paths that sync/atomic does not offer: a store with release semantics
// only, and a prefetch of a cache line for writing.
//
// sync/atomic's Store is sequentially consistent: on amd64 an XCHG, which
// waits until every earlier store of the CPU has reached the cache. After
// a store into a line that another core holds (a ring slot the peer has
// read), that is a whole cross-core round trip, paid once per message.
// A release store (a plain MOV on amd64, whose stores are never reordered
// with one another) publishes everything written before it just as well
// to a reader that loads the word with atomic.Load, without the wait. It
// is not a fence: a store followed by a load of another word that another
// process stores to (Dekker's pattern, a doorbell's sleeper count) still
// needs a sequentially consistent operation in between.
//
// Under the race detector, and on other architectures, StoreRelease32 and
// StoreRelease64 are atomic.StoreUint32 and atomic.StoreUint64 (the
// detector does not see stores made in assembly), and PrefetchW does
// nothing.
package order
