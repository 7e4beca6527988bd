package fm_test

import (
	"fmt"

	"github.com/adimpi/adimpi/devices/fm"
)

// Example sends one message to this process itself (run without mpirun,
// the program is rank 0 of 1) and reassembles it in a handler that is
// called once per packet.
func Example() {
	e, err := fm.Open(fm.Config{Packet: 128})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()
	var got []byte
	packets := 0
	e.SetHandler(1, func(e *fm.Endpoint, s *fm.Stream) {
		packets++
		b := make([]byte, s.Avail())
		e.Receive(s, b) // into wherever the bytes belong
		got = append(got, b...)
	})
	s, _ := e.BeginMessage(e.Rank(), 300, 1)
	for i := 0; i < 3; i++ {
		piece := make([]byte, 100)
		for j := range piece {
			piece[j] = byte('a' + i)
		}
		e.SendPiece(s, piece)
	}
	e.EndMessage(s)
	e.Poll(func() bool { return len(got) == 300 })
	fmt.Printf("%d bytes in %d packets of %d payload bytes: %s...%s\n", len(got), packets, e.Payload(), got[:3], got[297:])
	// Output: 300 bytes in 3 packets of 104 payload bytes: aaa...ccc
}
