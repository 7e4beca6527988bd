package main

import (
	"os/exec"
	"slices"
	"testing"
)

// TestProduceConsume: consume sums the lines produce wrote, a changed byte
// at a data line's start changes the sum and one in a gap does not.
func TestProduceConsume(t *testing.T) {
	for _, c := range []struct{ size, block, stride int }{{4096, 4096, 4096}, {8192, 1024, 2048}, {1000, 128, 256}, {0, 64, 64}} {
		b := make([]byte, c.size)
		produce(b, c.block, c.stride, 7)
		want := patternSum(c.size, c.block, c.stride, 7)
		if got := consume(b, c.block, c.stride); got != want {
			t.Errorf("%+v: consume = %d, want %d", c, got, want)
		}
		if c.size == 0 {
			continue
		}
		if c.block < c.stride {
			b[c.block] ^= 0xff // a gap byte
			if consume(b, c.block, c.stride) != want {
				t.Errorf("%+v: a gap byte changed the sum", c)
			}
		}
		b[0] ^= 0xff // the first data line
		if consume(b, c.block, c.stride) == want {
			t.Errorf("%+v: a data line's byte did not change the sum", c)
		}
	}
}

// TestTouchRuns runs bw and virtus with --touch under mpirun (the receiver
// checks every message's line sum) and checks their rows.
func TestTouchRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs mpirun jobs")
	}
	bin, launcher := buildBench(t), buildLauncher(t)
	for _, c := range []struct {
		args  []string
		bench []string
		sizes []int
	}{
		{[]string{"bw", "--min-size", "65536", "--max-size", "131072"}, []string{"bw_touch"}, []int{65536, 131072}},
		{[]string{"virtus", "--block-min", "1024", "--block-max", "2048", "--total", "262144"},
			[]string{"virtus_touch_strided", "virtus_touch_contig", "virtus_touch_ratio"}, []int{1024, 2048}},
	} {
		args := append([]string{"120", launcher, "-np", "2", bin}, c.args...)
		args = append(args, "--touch", "--csv", "--iters", "5", "--reps", "1")
		out, err := exec.Command("timeout", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, out)
		}
		var got []int
		for _, r := range parseRows(string(out)) {
			if !slices.Contains(c.bench, r.bench) || r.device != "netvm" || r.np != 2 || r.value <= 0 {
				t.Errorf("%v: unexpected row %+v", c.args, r)
			}
			if r.bench == c.bench[0] {
				got = append(got, r.size)
			}
		}
		if !slices.Equal(got, c.sizes) {
			t.Errorf("%v: sizes %v, want %v\n%s", c.args, got, c.sizes, out)
		}
	}
}
