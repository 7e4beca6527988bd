package via

import "unsafe"

// regCache keeps user buffers registered after their rendezvous is over
// (a pin-down cache, as MPI implementations over VIA keep): a buffer sent
// or received again needs no new registration, and its pages stay in the
// NIC's translation cache (at3) or table (at2). Entries no request uses are
// deregistered, least recently used first, when the cached bytes pass the
// limit (option regcache=N bytes; 0 deregisters at once) or the NIC runs
// out of regions. A cached entry keeps its buffer alive.
type regCache struct {
	limit   int
	bytes   int
	clock   uint64
	entries map[regKey]*regEntry
	byH     map[MemHandle]*regEntry
	hits    int64
	misses  int64
}

type regKey struct {
	p uintptr
	n int
}

type regEntry struct {
	key  regKey
	h    MemHandle
	refs int
	last uint64
}

func keyOf(b []byte) regKey { return regKey{uintptr(unsafe.Pointer(&b[0])), len(b)} }

// register returns a handle for b (len(b) > 0), registering it if needed.
func (d *Device) register(b []byte) (MemHandle, error) {
	c := &d.rc
	if c.entries == nil {
		c.entries, c.byH = map[regKey]*regEntry{}, map[MemHandle]*regEntry{}
	}
	c.clock++
	k := keyOf(b)
	if e := c.entries[k]; e != nil {
		e.refs++
		e.last = c.clock
		c.hits++
		return e.h, nil
	}
	c.misses++
	h, err := d.nic.RegisterMem(b)
	for err != nil && d.evict() {
		h, err = d.nic.RegisterMem(b)
	}
	if err != nil {
		return 0, err
	}
	e := &regEntry{key: k, h: h, refs: 1, last: c.clock}
	c.entries[k], c.byH[h] = e, e
	c.bytes += len(b)
	for c.bytes > c.limit && d.evict() {
	}
	return h, nil
}

// release drops a request's use of handle h.
func (d *Device) release(h MemHandle) {
	e := d.rc.byH[h]
	if e == nil {
		return
	}
	e.refs--
	for d.rc.bytes > d.rc.limit && d.evict() {
	}
}

// evict deregisters the least recently used unreferenced entry.
func (d *Device) evict() bool {
	c := &d.rc
	var victim *regEntry
	for _, e := range c.entries {
		if e.refs == 0 && (victim == nil || e.last < victim.last) {
			victim = e
		}
	}
	if victim == nil {
		return false
	}
	delete(c.entries, victim.key)
	delete(c.byH, victim.h)
	c.bytes -= victim.key.n
	_ = d.nic.DeregisterMem(victim.h)
	return true
}
