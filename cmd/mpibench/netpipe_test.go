package main

import "testing"

// TestParseNetpipe reads NetPIPE's progress lines into latency and
// bandwidth rows and the peak, and skips everything else.
func TestParseNetpipe(t *testing.T) {
	out := `Sending output to /dev/null
0: vm
Now starting the main loop
  0:       1 bytes    200 times -->      8.00 Mbps in       1.00 usec
  1:       8 bytes    200 times -->     64.00 Mbps in       1.00 usec
  2: 1048576 bytes    200 times -->  80000.00 Mbps in     104.86 usec
`
	rows := parseNetpipe("fm")(out)
	if len(rows) != 7 {
		t.Fatalf("%d rows, want 7: %v", len(rows), rows)
	}
	want := map[[2]any]float64{
		{"netpipe_lat", 8}: 1, {"netpipe_bw", 8}: 8, {"netpipe_lat", 1048576}: 104.86,
		{"netpipe_bw", 1048576}: 10000, {"netpipe_peak", 0}: 10000,
	}
	got := map[[2]any]float64{}
	for _, r := range rows {
		if r.device != "fm" || r.np != 2 {
			t.Errorf("row %+v: want device fm, np 2", r)
		}
		got[[2]any{r.bench, r.size}] = r.value
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%v = %v, want %v", k, got[k], v)
		}
	}
	// A latency run (8 B only) gives no peak: the quick plan's bandwidth
	// run of the same target does.
	if rows := parseNetpipe("fm")("  0:       8 bytes   2000 times -->     64.00 Mbps in       1.00 usec\n"); len(rows) != 2 {
		t.Errorf("8 B run: %d rows, want latency and bandwidth only: %v", len(rows), rows)
	}
	if rows := parseNetpipe("fm")("no numbers here\n"); rows != nil {
		t.Errorf("rows from no NetPIPE lines: %v", rows)
	}
}

// TestPingpongPeak takes the best size ÷ one-way time from 64 KiB up and
// ignores the small sizes, whose ratio says nothing about bandwidth.
func TestPingpongPeak(t *testing.T) {
	lat := map[int]float64{8: 0.001, 65536: 65.536, 1 << 20: 104.8576, 4 << 20: 1048.576}
	if got, ok := pingpongPeak(lat); !ok || got != 10000 {
		t.Errorf("pingpongPeak = %v, %v; want 10000, true", got, ok)
	}
	if _, ok := pingpongPeak(map[int]float64{8: 0.3}); ok {
		t.Error("pingpongPeak of 8 B only: ok, want no peak")
	}
}
