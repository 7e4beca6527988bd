package reliable

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

// frameSizes is a Link that records the size of every data frame sent
// through it, once (a retransmission is not counted again).
type frameSizes struct {
	*end
	sizes map[uint32]int // by sequence number
}

func (f *frameSizes) Send(fr []byte) bool {
	ok := f.end.Send(fr)
	if ok && fr[offKind] == kindData {
		f.sizes[binary.LittleEndian.Uint32(fr[offSeq:])] = len(fr)
	}
	return ok
}

// discard is a Handler that takes whatever comes.
type discard struct{}

func (discard) Frame(int, []byte, []byte) {}
func (discard) Sent(any)                  {}
func (discard) Lost(int, error)           {}

// quietPair makes two transports, ranks 0 and 1, joined by a pipe that
// loses nothing, with frames of mtu bytes; the link of rank 0 records the
// sizes of its data frames.
func quietPair(t *testing.T, mtu int) (a, b *Transport, link *frameSizes) {
	ab := &pipe{rng: rand.New(rand.NewPCG(1, 1))}
	ba := &pipe{rng: rand.New(rand.NewPCG(2, 1))}
	link = &frameSizes{end: &end{in: ba, out: ab}, sizes: map[uint32]int{}}
	mk := func(rank int, l Link) *Transport {
		tr, err := New(Config{Rank: rank, Size: 2, Job: 42, Secret: testSecret, MAC: mac(rank), MTU: mtu,
			Resolve: func(p int) (net.HardwareAddr, error) { return mac(p), nil },
			Handler: discard{}, Link: l, MinRTO: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	return mk(0, link), mk(1, &end{in: ab, out: ba}), link
}

// TestFillSize: a large transfer cut into messages of FillSize bytes
// leaves in full frames, the transfer's last frame excepted, where pieces
// of the size asked for (as netvm's 1 MiB and bip's 128 KiB chunks were)
// end in a short frame each (counted as Tails); FillSize never exceeds
// what was asked, and is what was asked when that does not fill a frame.
func TestFillSize(t *testing.T) {
	const mtu, total = 9014, 4 << 20
	for _, c := range []struct{ head, want int }{{32, 128 << 10}, {32, 1 << 20}, {0, 100 << 10}, {MaxHead, 64 << 10}} {
		a, b, link := quietPair(t, mtu)
		chunk := a.FillSize(c.head, c.want)
		if chunk > c.want || chunk <= c.want-a.payload {
			t.Errorf("head %d, want %d: FillSize %d, want at most %d and within a frame of it", c.head, c.want, chunk, c.want)
		}
		// send moves total bytes in messages of size and reports how many
		// data frames were short of the MTU, and the Tails counted.
		send := func(size int) (short, tails int) {
			clear(link.sizes)
			before := a.Counters().Tails
			head, body := make([]byte, c.head), make([]byte, size)
			for off := 0; off < total; off += size {
				if _, err := a.Send(1, head, body[:min(size, total-off)], nil); err != nil {
					t.Fatal(err)
				}
				for a.Pending() > 0 {
					b.Poll()
					a.Poll()
				}
			}
			for _, n := range link.sizes {
				if n != mtu {
					short++
				}
			}
			return short, int(a.Counters().Tails - before)
		}
		if short, tails := send(chunk); short > 1 || tails > 1 {
			t.Errorf("head %d, want %d: 4 MiB in messages of FillSize's %d bytes took %d short frames (%d tails): want at most the last",
				c.head, c.want, chunk, short, tails)
		}
		if short, tails := send(c.want); short < 2 || tails < short-1 || tails > short {
			t.Errorf("head %d, want %d: 4 MiB in messages of %d bytes took %d short frames, %d tails counted: want one each",
				c.head, c.want, c.want, short, tails)
		}
		if got := a.FillSize(c.head, 100); got != 100 {
			t.Errorf("FillSize(%d, 100) = %d, want 100 (less than a frame)", c.head, got)
		}
	}
}

// TestStreamAcks: a receiver taking a stream whose frames come closer
// together than ackDelay, its link running dry between them, acknowledges
// every ackEvery frames (and after any gap of ackDelay the stream really
// had), not ackDelay after the first frame it owes for: that sent an
// acknowledgement for every few frames of a 4 MiB stream.
func TestStreamAcks(t *testing.T) {
	a, b, _ := quietPair(t, 1514)
	const frames = 4 * ackEvery
	gap := ackDelay / 3
	long := 0 // gaps between frames of ackDelay or more (a loaded machine's)
	last := time.Now()
	for i := range frames {
		if _, err := a.Send(1, binary.LittleEndian.AppendUint64(nil, uint64(i)), make([]byte, 100), nil); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if i > 0 && now.Sub(last) >= ackDelay {
			long++
		}
		last = now
		b.Poll()
		for time.Since(last) < gap { // the link runs dry between frames
			b.Poll()
		}
	}
	if n := b.Counters().FramesIn; n != frames {
		t.Fatalf("%d of %d messages delivered", n, frames)
	}
	if got, most := b.Counters().AcksOut, int64(frames/ackEvery+long); got > most {
		t.Errorf("%d acknowledgements for %d frames %v apart (%d gaps of %v or more): want at most %d", got, frames, gap, long, ackDelay, most)
	}
}
