package wire

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/adimpi/adimpi/internal/reliable"
)

// EnvXDPImpair makes the XDP wire's link misbehave on the sending side, for
// tests of the transport over real AF_XDP sockets where the kernel has no
// netem: "loss=P,dup=P,reorder=P" with each P a probability per frame
// (drop it, send it twice, send it after the next frame). Unset in real
// jobs.
const EnvXDPImpair = "ADIMPI_XDP_IMPAIR"

// impairLink is a link that drops, duplicates and reorders what it sends.
type impairLink struct {
	reliable.Link
	loss, dup, reorder float64
	rng                *rand.Rand
	held               []byte // a frame kept back to go after the next one
}

// impaired wraps l as EnvXDPImpair asks, or returns l.
func impaired(l reliable.Link, rank int) (reliable.Link, error) {
	v := os.Getenv(EnvXDPImpair)
	if v == "" {
		return l, nil
	}
	il := &impairLink{Link: l, rng: rand.New(rand.NewPCG(uint64(rank)+1, uint64(os.Getpid())))}
	for _, kv := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(kv, "=")
		p, err := strconv.ParseFloat(val, 64)
		if err != nil || p < 0 || p >= 1 {
			return nil, fmt.Errorf("%s=%q: want loss=P,dup=P,reorder=P with 0 <= P < 1", EnvXDPImpair, v)
		}
		switch k {
		case "loss":
			il.loss = p
		case "dup":
			il.dup = p
		case "reorder":
			il.reorder = p
		default:
			return nil, fmt.Errorf("%s=%q: unknown %q", EnvXDPImpair, v, k)
		}
	}
	return il, nil
}

// Send loses f, keeps it back to go after the next frame, or sends it
// (twice when duplicated). A frame kept back waits for the next Send, as a
// frame overtaken on the way arrives late or, when nothing follows it,
// after its retransmission.
func (l *impairLink) Send(f []byte) bool {
	r := l.rng.Float64()
	switch {
	case r < l.loss:
		return true
	case r < l.loss+l.reorder && l.held == nil:
		l.held = append([]byte(nil), f...)
		return true
	}
	if !l.Link.Send(f) {
		return false
	}
	if r >= l.loss+l.reorder && r < l.loss+l.reorder+l.dup {
		l.Link.Send(f)
	}
	if l.held != nil && l.Link.Send(l.held) {
		l.held = nil
	}
	return true
}
