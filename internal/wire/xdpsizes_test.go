package wire

import "testing"

// TestXDPSizes: at every MTU the window a rank grants its peers fits its
// receive half and is no larger than the runs a sender lends frames from
// (at MTU 65000 it was 120 frames against 112 runs: the sender copied the
// frames beyond its runs the slow way, about one in thirty of a 4 MiB
// stream's), and the runs fit the send half with room for copied frames.
func TestXDPSizes(t *testing.T) {
	for _, ifMTU := range []int{1500, 9000, 16000, 65000, 65535} {
		mtu := xdpMTU(ifMTU)
		run, runs, window := xdpSizes(mtu)
		if run*4096 < mtu {
			t.Errorf("MTU %d: a run of %d UMEM frames does not hold a frame of %d bytes", ifMTU, run, mtu)
		}
		if run*runs > xdpFrames/2-xdpFrames/16 {
			t.Errorf("MTU %d: %d runs of %d frames leave too little of the send half for copied frames", ifMTU, runs, run)
		}
		pieces := (mtu + xdpPiece - 1) / xdpPiece
		if window < 1 || window*pieces > xdpFrames/2 {
			t.Errorf("MTU %d: a window of %d frames of %d pieces does not fit the receive half", ifMTU, window, pieces)
		}
		if window > runs {
			t.Errorf("MTU %d: a window of %d frames against %d lent runs: frames beyond the runs are copied", ifMTU, window, runs)
		}
	}
}
