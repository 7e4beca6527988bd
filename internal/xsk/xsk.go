// Package xsk is an AF_XDP socket: a region of memory shared with the
// kernel (the UMEM), cut into frames, and four rings of descriptors into
// it. The process gives the kernel empty frames on the FILL ring and takes
// received ones from the RX ring; it puts frames to send on the TX ring and
// gets them back, sent, on the COMPLETION ring. No data passes through a
// socket buffer, and receiving or sending a frame needs no system call
// beyond the wake-ups the kernel asks for (need-wakeup).
//
// A socket binds one queue of one interface. It binds in zero-copy mode
// where the driver supports it and falls back to copy mode (veth, for
// instance), where the kernel copies each frame between its own buffers
// and the UMEM.
//
// The UMEM's frames are split in two fixed halves: the receive half
// circulates between the FILL and RX rings inside the package; the send
// half belongs to the caller, who takes a frame with AllocTX, fills it,
// hands it to the kernel with Transmit, learns through Completed that the
// kernel is done with it, and may then send it again (a retransmission) or
// give it back with FreeTX. A Socket is not safe for concurrent use, except
// that FD may be polled from anywhere.
package xsk

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Config describes a socket to Open.
type Config struct {
	Ifindex int // the interface
	Queue   int // its receive queue
	// Frames is the number of UMEM frames, a power of two; half receive,
	// half send. Default 4096.
	Frames int
	// FrameSize is the size of a frame, 2048 or 4096. Default 2048.
	FrameSize int
	// CopyOnly skips the zero-copy attempt.
	CopyOnly bool
	// Multi lets a frame span several UMEM frames (XDP_USE_SG): a frame
	// longer than a UMEM frame (a jumbo frame) is sent with SendFrame and
	// received whole through Receive, gathered from its pieces.
	Multi bool
	// LendRuns runs of LendRun contiguous send frames are set aside, from
	// the top of the send half, for Lend (see lend.go); the rest of the
	// send half serves SendFrame.
	LendRun, LendRuns int
}

// Socket is an open AF_XDP socket with its UMEM and rings.
type Socket struct {
	fd        int
	umem      []byte
	frameSize uint64
	fill      ring
	comp      ring
	rx        ring
	tx        ring
	freeTX    []uint64 // send frames the caller may take
	inTX      int      // frames on the TX ring or in the kernel
	multi     bool
	gather    []byte   // the pieces of a received frame that spans several, for Receive
	pieces    [][]byte // the pieces of the frame ReceivePieces is taking
	lend      lender   // the runs of send frames Lend gives out
	// ZeroCopy reports whether the bind is zero-copy.
	ZeroCopy bool
	// Kicks counts the sendto calls that woke the kernel's transmit path,
	// Rekicks those that found it busy (EAGAIN, EBUSY) and will be retried.
	Kicks, Rekicks int64
}

// Open creates the socket, registers its UMEM, maps its rings, fills the
// FILL ring and binds it to the queue.
func Open(cfg Config) (*Socket, error) {
	if cfg.Frames == 0 {
		cfg.Frames = 4096
	}
	if cfg.FrameSize == 0 {
		cfg.FrameSize = 2048
	}
	if cfg.Frames < 4 || cfg.Frames&(cfg.Frames-1) != 0 || (cfg.FrameSize != 2048 && cfg.FrameSize != 4096) {
		return nil, fmt.Errorf("xsk: %d frames of %d bytes: want a power of two of 2048 or 4096", cfg.Frames, cfg.FrameSize)
	}
	if cfg.LendRun < 0 || cfg.LendRuns < 0 || cfg.LendRun*cfg.LendRuns > cfg.Frames/2-cfg.Frames/16 || (cfg.LendRun > 1 && !cfg.Multi) {
		return nil, fmt.Errorf("xsk: %d runs of %d frames to lend do not fit %d frames (or need Multi)", cfg.LendRuns, cfg.LendRun, cfg.Frames)
	}
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("xsk: socket(AF_XDP): %w", err)
	}
	s := &Socket{fd: fd, frameSize: uint64(cfg.FrameSize), multi: cfg.Multi}
	if err := s.setup(cfg); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Socket) setup(cfg Config) error {
	var err error
	size := cfg.Frames * cfg.FrameSize
	if s.umem, err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("xsk: UMEM of %d bytes: %w", size, err)
	}
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&s.umem[0]))), Len: uint64(size), Size: uint32(cfg.FrameSize)}
	if err := setsockopt(s.fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return fmt.Errorf("xsk: registering the UMEM (%d bytes; without CAP_IPC_LOCK it counts against RLIMIT_MEMLOCK): %w", size, err)
	}
	half := uint32(cfg.Frames / 2)
	for _, o := range []struct{ opt, n int }{{unix.XDP_UMEM_FILL_RING, int(half)}, {unix.XDP_UMEM_COMPLETION_RING, int(half)}, {unix.XDP_RX_RING, int(half)}, {unix.XDP_TX_RING, int(half)}} {
		if err := unix.SetsockoptInt(s.fd, unix.SOL_XDP, o.opt, o.n); err != nil {
			return fmt.Errorf("xsk: ring size option %d: %w", o.opt, err)
		}
	}
	var off unix.XDPMmapOffsets
	ol := uint32(unsafe.Sizeof(off))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(s.fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS, uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&ol)), 0); e != 0 {
		return fmt.Errorf("xsk: XDP_MMAP_OFFSETS: %w", e)
	}
	descSize := uint32(unsafe.Sizeof(unix.XDPDesc{}))
	if s.fill, err = mapRing(s.fd, unix.XDP_UMEM_PGOFF_FILL_RING, half, 8, off.Fr); err != nil {
		return fmt.Errorf("xsk: FILL ring: %w", err)
	}
	if s.comp, err = mapRing(s.fd, unix.XDP_UMEM_PGOFF_COMPLETION_RING, half, 8, off.Cr); err != nil {
		return fmt.Errorf("xsk: COMPLETION ring: %w", err)
	}
	if s.rx, err = mapRing(s.fd, unix.XDP_PGOFF_RX_RING, half, descSize, off.Rx); err != nil {
		return fmt.Errorf("xsk: RX ring: %w", err)
	}
	if s.tx, err = mapRing(s.fd, unix.XDP_PGOFF_TX_RING, half, descSize, off.Tx); err != nil {
		return fmt.Errorf("xsk: TX ring: %w", err)
	}
	// The first half of the frames receive, the second half send.
	p := atomic.LoadUint32(s.fill.producer)
	for i := range half {
		*s.fill.addr(p + i) = uint64(i) * s.frameSize
	}
	atomic.StoreUint32(s.fill.producer, p+half)
	lent := uint32(cfg.LendRun * cfg.LendRuns)
	for i := uint32(cfg.Frames) - lent - 1; i >= half; i-- {
		s.freeTX = append(s.freeTX, uint64(i)*s.frameSize)
	}
	s.lend.init(uint64(uint32(cfg.Frames)-lent)*s.frameSize, cfg.LendRun, cfg.LendRuns, s.frameSize)
	return s.bind(cfg)
}

// bind binds zero-copy where the driver can, else copy mode.
func (s *Socket) bind(cfg Config) error {
	var sg uint16
	if cfg.Multi {
		sg = unix.XDP_USE_SG
	}
	sa := &unix.SockaddrXDP{Flags: unix.XDP_ZEROCOPY | unix.XDP_USE_NEED_WAKEUP | sg, Ifindex: uint32(cfg.Ifindex), QueueID: uint32(cfg.Queue)}
	if !cfg.CopyOnly {
		if err := unix.Bind(s.fd, sa); err == nil {
			s.ZeroCopy = true
			return nil
		}
	}
	sa.Flags = unix.XDP_COPY | unix.XDP_USE_NEED_WAKEUP | sg
	// The kernel releases a closed socket's hold on its queue in the
	// background: a socket of a process that has just exited can keep the
	// queue busy for a moment.
	deadline := time.Now().Add(bindPatience)
	for {
		err := unix.Bind(s.fd, sa)
		if err == nil {
			return nil
		}
		if err != unix.EBUSY || time.Now().After(deadline) {
			return fmt.Errorf("xsk: binding queue %d of interface %d: %w", cfg.Queue, cfg.Ifindex, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// bindPatience is how long a bind waits for a queue another socket holds.
const bindPatience = 2 * time.Second

func setsockopt(fd, opt int, p unsafe.Pointer, n uintptr) error {
	if _, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), n, 0); e != 0 {
		return e
	}
	return nil
}

// FD is the socket's file descriptor, for poll(2) and the XSKMAP.
func (s *Socket) FD() int { return s.fd }

// FrameSize is the size of a UMEM frame.
func (s *Socket) FrameSize() int { return int(s.frameSize) }

// Frame is the memory of the send frame at addr.
func (s *Socket) Frame(addr uint64) []byte {
	return s.umem[addr : addr+s.frameSize : addr+s.frameSize]
}

// AllocTX takes a free send frame; ok is false when none is left.
func (s *Socket) AllocTX() (addr uint64, ok bool) {
	n := len(s.freeTX)
	if n == 0 {
		return 0, false
	}
	addr = s.freeTX[n-1]
	s.freeTX = s.freeTX[:n-1]
	return addr, true
}

// FreeTX gives a send frame back; the kernel must be done with it.
func (s *Socket) FreeTX(addr uint64) { s.freeTX = append(s.freeTX, addr) }

// FreeFrames is the number of send frames AllocTX may still give.
func (s *Socket) FreeFrames() int { return len(s.freeTX) }

// Transmit puts the first n bytes of the send frame at addr on the TX
// ring. It reports false when the ring is full. The frame is the kernel's
// until Completed returns it; Kick makes the kernel send.
func (s *Socket) Transmit(addr uint64, n int) bool {
	if s.tx.free() == 0 {
		return false
	}
	p := atomic.LoadUint32(s.tx.producer)
	d := s.tx.xdpDesc(p)
	d.Addr, d.Len, d.Options = addr, uint32(n), 0
	atomic.StoreUint32(s.tx.producer, p+1)
	s.inTX++
	return true
}

// SendFrame copies frame into as many send frames as it needs and puts
// them on the TX ring as one frame (the pieces but the last marked
// XDP_PKT_CONTD; a socket opened without Multi takes only frames that fit
// one UMEM frame). It takes back what the kernel has completed when it
// runs short, and reports false when the frames or the ring are short even
// so (try again after a Kick).
func (s *Socket) SendFrame(frame []byte) bool {
	k := (len(frame) + int(s.frameSize) - 1) / int(s.frameSize)
	if k == 0 || (k > 1 && !s.multi) {
		return false
	}
	if len(s.freeTX) < k {
		s.Completed(s.FreeTX)
	}
	if len(s.freeTX) < k || s.tx.free() < uint32(k) {
		return false
	}
	p := atomic.LoadUint32(s.tx.producer)
	for i := range k {
		addr := s.freeTX[len(s.freeTX)-1]
		s.freeTX = s.freeTX[:len(s.freeTX)-1]
		n := copy(s.umem[addr:addr+s.frameSize], frame)
		frame = frame[n:]
		d := s.tx.xdpDesc(p + uint32(i))
		d.Addr, d.Len, d.Options = addr, uint32(n), 0
		if i < k-1 {
			d.Options = unix.XDP_PKT_CONTD
		}
	}
	atomic.StoreUint32(s.tx.producer, p+uint32(k))
	s.inTX += k
	return true
}

// TXQueued is the number of frames on the TX ring the kernel has not yet
// taken.
func (s *Socket) TXQueued() int { return int(s.tx.ready()) }

// InFlight is the number of frames given to Transmit and not yet returned
// by Completed.
func (s *Socket) InFlight() int { return s.inTX }

// Kick asks the kernel to send what the TX ring holds, when it wants to be
// asked (in copy mode, always). EAGAIN and EBUSY mean the kernel sent part
// (its per-call budget) or is busy: not errors, the caller kicks again
// while frames are in flight.
func (s *Socket) Kick() error {
	if !s.tx.needWakeup() {
		return nil
	}
	s.Kicks++
	// A raw system call: with MSG_DONTWAIT it does not block, and the
	// runtime's bookkeeping around a blocking one is on the path of every
	// message.
	_, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	var err error
	if errno != 0 {
		err = errno
	}
	switch err {
	case nil:
		return nil
	case unix.EAGAIN, unix.EBUSY, unix.ENOBUFS, unix.EINTR:
		s.Rekicks++
		return nil
	}
	return fmt.Errorf("xsk: kicking the transmit path: %w", err)
}

// Completed calls done with every send frame the kernel has finished with
// (a lent run's frames it keeps: see Return), and reports how many there
// were.
func (s *Socket) Completed(done func(addr uint64)) int {
	n := s.comp.ready()
	if n == 0 {
		return 0
	}
	c := atomic.LoadUint32(s.comp.consumer)
	for i := range n {
		addr := *s.comp.addr(c + i) &^ (s.frameSize - 1)
		if addr >= s.lend.base && s.lend.runs > 0 {
			s.lend.completed(addr)
			continue
		}
		done(addr)
	}
	atomic.StoreUint32(s.comp.consumer, c+n)
	s.inTX -= int(n)
	return int(n)
}

// Receive calls got with each received frame (at most budget pieces of
// them), then gives the pieces back to the FILL ring; frame is valid only
// during the call. A frame in several pieces (Multi) is gathered into a
// buffer of the socket's first. It reports how many pieces there were.
func (s *Socket) Receive(budget int, got func(frame []byte)) int {
	return s.ReceivePieces(budget, func(pieces [][]byte) {
		if len(pieces) == 1 {
			got(pieces[0])
			return
		}
		s.gather = s.gather[:0]
		for _, p := range pieces {
			s.gather = append(s.gather, p...)
		}
		got(s.gather)
	})
}

// ReceivePieces calls got with each received frame as the pieces the
// kernel put it in (one unless Multi), in place in the UMEM and valid only
// during the call, then gives the pieces back to the FILL ring. It stops
// at the first frame end after budget pieces and reports how many pieces
// there were. The kernel publishes a frame's pieces together; a frame
// whose last piece is not in the ring yet stays there for the next call.
func (s *Socket) ReceivePieces(budget int, got func(pieces [][]byte)) int {
	ready := s.rx.ready()
	if ready == 0 {
		if s.fill.needWakeup() {
			_, _, _ = unix.Recvfrom(s.fd, nil, unix.MSG_DONTWAIT)
		}
		return 0
	}
	c := atomic.LoadUint32(s.rx.consumer)
	fp := atomic.LoadUint32(s.fill.producer)
	var done uint32 // pieces of whole frames handled
	s.pieces = s.pieces[:0]
	for i := range ready {
		d := s.rx.xdpDesc(c + i)
		s.pieces = append(s.pieces, s.umem[d.Addr:d.Addr+uint64(d.Len)])
		if d.Options&unix.XDP_PKT_CONTD != 0 {
			continue
		}
		got(s.pieces)
		s.pieces = s.pieces[:0]
		for ; done <= i; done++ {
			*s.fill.addr(fp + done) = s.rx.xdpDesc(c+done).Addr &^ (s.frameSize - 1)
		}
		if done >= uint32(budget) {
			break
		}
	}
	s.pieces = s.pieces[:0]
	if done == 0 {
		return 0
	}
	atomic.StoreUint32(s.rx.consumer, c+done)
	// The FILL ring has room: it holds at most the receive half, and these
	// frames have just left the kernel.
	atomic.StoreUint32(s.fill.producer, fp+done)
	return int(done)
}

// Statistics are the kernel's counters of the socket (XDP_STATISTICS).
type Statistics = unix.XDPStatistics

// Stats reads the kernel's counters of the socket.
func (s *Socket) Stats() (Statistics, error) {
	var st Statistics
	l := uint32(unsafe.Sizeof(st))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(s.fd), unix.SOL_XDP, unix.XDP_STATISTICS, uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&l)), 0); e != 0 {
		return st, fmt.Errorf("xsk: XDP_STATISTICS: %w", e)
	}
	return st, nil
}

// Close unmaps the rings and the UMEM and closes the socket.
func (s *Socket) Close() error {
	for _, r := range []*ring{&s.fill, &s.comp, &s.rx, &s.tx} {
		r.unmap()
	}
	var err error
	if s.fd >= 0 {
		err = unix.Close(s.fd)
		s.fd = -1
	}
	if s.umem != nil {
		err = errors.Join(err, unix.Munmap(s.umem))
		s.umem = nil
	}
	return err
}
