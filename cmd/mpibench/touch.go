package main

import (
	"iter"

	"github.com/adimpi/adimpi/mpi"
)

// With --touch, bw and virtus move data the way a program does: the sender
// writes every cache line of a message's data just before sending it, and
// the receiver reads every line just after receiving it. Without it both
// ranks send the same untouched buffer again and again, so a copy that
// never moves a line between the two cores (a single copy into a buffer
// the receiver never reads) is timed against one that must (a stream
// through shared memory); with it every message's lines start in the
// sender's cache and end in the receiver's, whichever way they travel.

// dataLines yields the offset of the first byte of every cache line of the
// data in size bytes: blocks of block bytes, one every stride bytes.
func dataLines(size, block, stride int) iter.Seq[int] {
	return func(yield func(int) bool) {
		for o := 0; o < size; o += stride {
			for k := o; k < min(o+block, size); k += 64 {
				if !yield(k) {
					return
				}
			}
		}
	}
}

// produce stores fill's pattern for size n into the first byte of every
// cache line of b's data (blocks as in dataLines).
func produce(b []byte, block, stride, n int) {
	for k := range dataLines(len(b), block, stride) {
		b[k] = byte(k*7 + n + 1)
	}
}

// consume sums the first byte of every cache line of b's data.
func consume(b []byte, block, stride int) uint64 {
	var sum uint64
	for k := range dataLines(len(b), block, stride) {
		sum += uint64(b[k])
	}
	return sum
}

// patternSum is what consume returns for a buffer of size bytes that holds
// fill's pattern for size n.
func patternSum(size, block, stride, n int) uint64 {
	var sum uint64
	for k := range dataLines(size, block, stride) {
		sum += uint64(byte(k*7 + n + 1))
	}
	return sum
}

// touchLoop runs count produce-send-receive-consume rounds of one message
// (buf, 1) between ranks 0 and 1, each acknowledged with 4 bytes; mem is
// the message's memory, its data in blocks as in produce, n the size that
// fill's pattern was written for. The receiver checks every message's sum
// against want.
func touchLoop(c *mpi.Comm, buf mpi.Buffer, mem []byte, block, stride, n int, want uint64, count int, tag int) {
	ack := make([]byte, 4)
	for i := 0; i < count; i++ {
		if c.Rank() == 0 {
			produce(mem, block, stride, n)
			check(mpi.SendBuf(c, buf, 1, tag), "touch send")
			_, err := mpi.Recv(c, ack, 1, tagAck)
			check(err, "touch ack recv")
			continue
		}
		_, err := mpi.RecvBuf(c, buf, 0, tag)
		check(err, "touch recv")
		if got := consume(mem, block, stride); got != want {
			fail("touch: a received message's line sum is %d, want %d", got, want)
		}
		check(mpi.Send(c, ack, 0, tagAck), "touch ack send")
	}
}
