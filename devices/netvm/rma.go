package netvm

import "github.com/adimpi/adimpi/adi"

// netvm offers one-sided communication's remote memory access natively:
// NetVM's remote write and read (process_vm_writev/readv) into a peer on
// this host, without the peer's help.
var _ adi.RemoteMemory = (*Device)(nil)

// RemoteAccess reports whether peer p is on this host and may be written
// and read with process_vm_writev/readv (cma=auto and the kernel allows it).
func (d *Device) RemoteAccess(p int) bool {
	if p < 0 || p >= len(d.peers) {
		return false
	}
	q := d.peers[p]
	return q.net == nil && q.remoteOK && q.pid != 0
}

// ExposeMemory needs no registration: process_vm_writev reaches any
// address of a peer. The key is 0.
func (d *Device) ExposeMemory([]byte) (uint64, error) { return 0, nil }

// UnexposeMemory has nothing to undo.
func (d *Device) UnexposeMemory(uint64) error { return nil }

// RemoteWrite writes src into peer p's memory at addr.
func (d *Device) RemoteWrite(p int, _ uint64, addr uintptr, src []byte) error {
	d.cnt.rmaWrites++
	return d.BoardWrite(p, addr, src)
}

// RemoteRead reads peer p's memory at addr into dst.
func (d *Device) RemoteRead(p int, _ uint64, addr uintptr, dst []byte) error {
	d.cnt.rmaReads++
	return d.BoardRead(p, addr, dst)
}
