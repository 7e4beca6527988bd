package bip_test

import (
	"fmt"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/devices/bip"
)

// A process started without a launcher is rank 0 of 1, so this example
// talks to itself; under mpirun every rank would run it with its peers.
func Example() {
	e, err := bip.Open(map[string]string{"queue": "8"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()
	me := e.Rank()

	// A short message completes at once: it waits in the receiver's queue.
	if err := e.SendShort(me, 5, []byte("hello, BIP")); err != nil {
		fmt.Println(err)
		return
	}
	buf := make([]byte, e.ShortMax())
	src, tag, n, _ := e.RecvShort(bip.AnySource, buf)
	fmt.Printf("short from %d tag %d: %s\n", src, tag, buf[:n])

	// A long message needs its receive posted first (rendezvous).
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i)
	}
	into := make([]byte, len(big))
	r, _ := e.PostLong(me, 9, adi.Bytes(into), nil)
	if err := e.SendLong(me, 9, big); err != nil {
		fmt.Println(err)
		return
	}
	_ = e.Wait(r.Done, r.Err)
	fmt.Printf("long: %d bytes, last %d\n", r.Bytes(), into[len(into)-1])
	// Output:
	// short from 0 tag 5: hello, BIP
	// long: 1048576 bytes, last 255
}
