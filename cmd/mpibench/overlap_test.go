package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

// ovlSample is a results CSV as bench/compare-overlap.sh builds it: two
// headers, a blank line, rows of another benchmark, netvm with and without
// async progress, and MPICH.
const ovlSample = `bench,device,np,size,value,unit
overlap_latency,netvm,2,8,2.000,us
overlap_tcomm,netvm,2,1024,4.000,us
overlap_tcomp,netvm,2,1024,500.0,us
overlap_tovl_plain,netvm,2,1024,503.0,us
overlap_plain,netvm,2,1024,0.2500,x
overlap_tovl_iprobe,netvm,2,1024,501.0,us
overlap_iprobe,netvm,2,1024,0.7500,x

bench,device,np,size,value,unit
coll_barrier,netvm,2,0,1.5,us
overlap_latency,netvm+async,2,8,2.200,us
overlap_tcomm,netvm+async,2,1024,4.000,us
overlap_tcomp,netvm+async,2,1024,500.0,us
overlap_tovl_async,netvm+async,2,1024,500.0,us
overlap_async,netvm+async,2,1024,1.000,x
overlap_plain,mpich,2,1024,0.1000,x
overlap_plain,mpich,2,1024,0.2000,x
`

func TestReadOverlapResults(t *testing.T) {
	res, err := readOverlapResults(strings.NewReader(ovlSample))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res.get("coll_barrier", "netvm", 2, 0); ok {
		t.Error("a coll_ row was kept")
	}
	for _, c := range []struct {
		bench, device string
		size          int
		want          float64
	}{
		{"overlap_plain", "netvm", 1024, 0.25},
		{"overlap_iprobe", "netvm", 1024, 0.75},
		{"overlap_async", "netvm+async", 1024, 1},
		{"overlap_plain", "mpich", 1024, 0.2}, // the later row wins
		{"overlap_latency", "netvm+async", 8, 2.2},
	} {
		if v, ok := res.get(c.bench, c.device, 2, c.size); !ok || v != c.want {
			t.Errorf("%s %s %d: got %v (present %v), want %v", c.bench, c.device, c.size, v, ok, c.want)
		}
	}
	if got, want := res.devices(), []string{"netvm", "netvm+async", "mpich"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("devices: got %v, want %v", got, want)
	}
	if r, ok := res.latencyAsyncRatio("netvm", 2); !ok || math.Abs(r-1.1) > 1e-9 {
		t.Errorf("latency_async_ratio: got %v (%v), want 1.1", r, ok)
	}
	if _, ok := res.latencyAsyncRatio("mpich", 2); ok {
		t.Error("latency_async_ratio for mpich, which has no async run")
	}

	var b strings.Builder
	writeOverlapSummary(&b, res)
	out := b.String()
	for _, want := range []string{
		"netvm plain  netvm iprobe  netvm+async  mpich plain",
		"1 KiB        0.25*         0.75*        1.00*         0.20",
		"latency_async_ratio netvm: 1.10x (within the 1.2x target)",
		"latency_async_ratio,netvm,2,8,1.100,x",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

func TestReadOverlapResultsErrors(t *testing.T) {
	for _, in := range []string{
		"overlap_plain,netvm,2,1024,0.5\n",     // five fields
		"overlap_plain,netvm,two,1024,0.5,x\n", // np not a number
		"overlap_plain,netvm,2,1024,half,x\n",  // value not a number
	} {
		if _, err := readOverlapResults(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: got error %v, want one naming line 1", in, err)
		}
	}
	res, err := readOverlapResults(strings.NewReader("bench,device,np,size,value,unit\n"))
	if err != nil || len(res) != 0 {
		t.Errorf("header only: got %v, %v", res, err)
	}
}

func TestOverlapRatio(t *testing.T) {
	for _, c := range []struct{ comm, comp, ovl, want float64 }{
		{100, 500, 500, 1},   // all hidden
		{100, 500, 600, 0},   // nothing hidden
		{100, 500, 550, 0.5}, // half
		{100, 500, 700, 0},   // worse than serial: clamped
		{100, 500, 300, 1},   // faster than the computation: clamped
		{0, 500, 500, 0},     // no communication time
	} {
		if got := overlapRatio(c.comm, c.comp, c.ovl); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("overlapRatio(%v, %v, %v) = %v, want %v", c.comm, c.comp, c.ovl, got, c.want)
		}
	}
}

func TestParseOverlapArgs(t *testing.T) {
	o, err := parseOverlapArgs(nil)
	if err != nil || strings.Join(o.variants, ",") != "plain,iprobe" || o.compute != 500*time.Microsecond || o.poll != 10*time.Microsecond {
		t.Errorf("defaults: got %+v, %v", o, err)
	}
	o, err = parseOverlapArgs([]string{"iprobe", "compute=1ms", "poll=5us"})
	if err != nil || strings.Join(o.variants, ",") != "iprobe" || o.compute != time.Millisecond || o.poll != 5*time.Microsecond {
		t.Errorf("iprobe compute=1ms poll=5us: got %+v, %v", o, err)
	}
	for _, bad := range []string{"async", "compute=0", "compute=fast", "size=3"} {
		if _, err := parseOverlapArgs([]string{bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
