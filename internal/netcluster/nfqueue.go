package netcluster

import (
	"encoding/binary"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// An nfqueue is a netfilter queue (nfnetlink_queue): packets that an
// iptables NFQUEUE rule sends to it wait in the kernel until the process
// bound to the queue gives each a verdict. The delay line (delay.go) binds
// one in a host's network namespace and accepts every packet a fixed time
// after it arrived: the packet itself never leaves the kernel, only its
// identifier is read.
type nfqueue struct {
	fd  int
	num uint16
	buf []byte
}

// nfnetlink_queue's protocol numbers (linux/netfilter/nfnetlink_queue.h).
const (
	nfnlSubsysQueue = 3 // NFNL_SUBSYS_QUEUE

	nfqnlMsgPacket       = 0 // NFQNL_MSG_PACKET: a packet waits
	nfqnlMsgVerdict      = 1 // NFQNL_MSG_VERDICT: the verdict on one packet
	nfqnlMsgConfig       = 2 // NFQNL_MSG_CONFIG
	nfqnlMsgVerdictBatch = 3 // NFQNL_MSG_VERDICT_BATCH: on every packet up to an id

	nfqaPacketHdr  = 1 // NFQA_PACKET_HDR
	nfqaVerdictHdr = 2 // NFQA_VERDICT_HDR

	nfqaCfgCmd      = 1 // NFQA_CFG_CMD
	nfqaCfgParams   = 2 // NFQA_CFG_PARAMS
	nfqaCfgQueueMax = 3 // NFQA_CFG_QUEUE_MAXLEN

	nfqnlCfgCmdBind = 1 // NFQNL_CFG_CMD_BIND
	nfqnlCopyMeta   = 1 // NFQNL_COPY_META: no payload

	nfAccept = 1 // NF_ACCEPT
)

// nfqueueMax is how many packets may wait in the queue: a delay of d at a
// rate of r packets a second holds d·r of them; more are dropped.
const nfqueueMax = 1 << 16

// openNfqueue binds queue num of the calling thread's network namespace.
func openNfqueue(num uint16) (*nfqueue, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %v", err)
	}
	q := &nfqueue{fd: fd, num: num, buf: make([]byte, 1<<16)}
	// Room for the packets of a burst, so that the kernel does not give up
	// on a reader that is a moment late (it would drop the notices, and the
	// packets would wait for ever).
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		q.close()
		return nil, fmt.Errorf("netlink bind: %v", err)
	}
	cmd := []byte{nfqnlCfgCmdBind, 0, 0, 0} // command, pad, protocol family (unused since Linux 3.8)
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params[0:4], 0) // copy range
	params[4] = nfqnlCopyMeta
	var maxlen [4]byte
	binary.BigEndian.PutUint32(maxlen[:], nfqueueMax)
	for _, attrs := range [][]nlattr{{{nfqaCfgCmd, cmd}}, {{nfqaCfgParams, params}, {nfqaCfgQueueMax, maxlen[:]}}} {
		if err := q.request(nfqnlMsgConfig, attrs, true); err != nil {
			q.close()
			return nil, fmt.Errorf("binding queue %d: %v", num, err)
		}
	}
	return q, nil
}

func (q *nfqueue) close() { unix.Close(q.fd) }

// nlattr is one netlink attribute.
type nlattr struct {
	typ  uint16
	data []byte
}

// request sends one nfnetlink_queue message and, with ack, waits for the
// kernel's answer.
func (q *nfqueue) request(msg uint16, attrs []nlattr, ack bool) error {
	b := make([]byte, unix.NLMSG_HDRLEN+4, 64)
	for _, a := range attrs {
		var h [4]byte
		binary.NativeEndian.PutUint16(h[0:2], uint16(4+len(a.data)))
		binary.NativeEndian.PutUint16(h[2:4], a.typ)
		b = append(append(b, h[:]...), a.data...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	flags := uint16(unix.NLM_F_REQUEST)
	if ack {
		flags |= unix.NLM_F_ACK
	}
	binary.NativeEndian.PutUint32(b[0:4], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:6], nfnlSubsysQueue<<8|msg)
	binary.NativeEndian.PutUint16(b[6:8], flags)
	// nfgenmsg: family, version, resource id (the queue, big-endian).
	b[16], b[17] = unix.AF_UNSPEC, 0 // NFNETLINK_V0
	binary.BigEndian.PutUint16(b[18:20], q.num)
	if err := unix.Sendto(q.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	if !ack {
		return nil
	}
	n, _, err := unix.Recvfrom(q.fd, q.buf, 0)
	if err != nil {
		return err
	}
	msgs, err := syscall.ParseNetlinkMessage(q.buf[:n])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
			if e := int32(binary.NativeEndian.Uint32(m.Data[0:4])); e != 0 {
				return unix.Errno(-e)
			}
		}
	}
	return nil
}

// read waits up to wait (negative: without limit) for packets to arrive
// and appends the identifiers of all that wait to ids.
func (q *nfqueue) read(ids []uint32, wait time.Duration) ([]uint32, error) {
	var ts *unix.Timespec
	if wait >= 0 {
		t := unix.NsecToTimespec(wait.Nanoseconds())
		ts = &t
	}
	fds := []unix.PollFd{{Fd: int32(q.fd), Events: unix.POLLIN}}
	if n, err := unix.Ppoll(fds, ts, nil); n <= 0 {
		if err == unix.EINTR {
			err = nil
		}
		return ids, err
	}
	for {
		n, _, err := unix.Recvfrom(q.fd, q.buf, unix.MSG_DONTWAIT)
		switch err {
		case nil:
		case unix.EAGAIN, unix.EINTR:
			return ids, nil
		case unix.ENOBUFS:
			// The kernel dropped notices: the packets they announced wait
			// without one. The next verdict batch releases them with the
			// packets after them.
			fmt.Fprintln(os.Stderr, "netcluster delay line: notices lost (ENOBUFS)")
			continue
		default:
			return ids, err
		}
		msgs, err := syscall.ParseNetlinkMessage(q.buf[:n])
		if err != nil {
			return ids, err
		}
		for _, m := range msgs {
			if m.Header.Type != nfnlSubsysQueue<<8|nfqnlMsgPacket || len(m.Data) < 4 {
				continue
			}
			if id, ok := packetID(m.Data[4:]); ok { // after the nfgenmsg
				ids = append(ids, id)
			}
		}
	}
}

// acceptUpTo lets every waiting packet with an identifier up to id go on.
func (q *nfqueue) acceptUpTo(id uint32) error {
	var v [8]byte
	binary.BigEndian.PutUint32(v[0:4], nfAccept)
	binary.BigEndian.PutUint32(v[4:8], id)
	return q.request(nfqnlMsgVerdictBatch, []nlattr{{nfqaVerdictHdr, v[:]}}, false)
}

// packetID finds the packet identifier among a packet notice's attributes.
func packetID(b []byte) (uint32, bool) {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4]) & 0x7fff // without the nested and byte-order flags
		if l < 4 || l > len(b) {
			return 0, false
		}
		if typ == nfqaPacketHdr && l >= 8 {
			return binary.BigEndian.Uint32(b[4:8]), true
		}
		b = b[min((l+3)&^3, len(b)):]
	}
	return 0, false
}
