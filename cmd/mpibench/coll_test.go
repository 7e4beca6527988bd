package main

import (
	"bytes"
	"strings"
	"testing"
)

const collCSV = `bench,device,np,size,value,unit
coll_barrier,netvm,2,0,9.000,us
pingpong,netvm,2,8,0.5000,us
bench,device,np,size,value,unit
coll_barrier,netvm,2,0,3.000,us
coll_barrier,mpich,2,0,2.000,us
coll_barrier,openmpi,2,0,1.500,us
coll_allreduce,netvm,4,8388608,5000.0,us
coll_allreduce,openmpi,4,8388608,1000.0,us

coll_bcast,netvm,8,1048576,100.000,us
`

func TestReadCollResults(t *testing.T) {
	res, err := readCollResults(strings.NewReader(collCSV))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 6 {
		t.Errorf("got %d rows, want 6 (coll_ rows only, duplicates merged): %v", len(res), res)
	}
	if v := res[collKey{"coll_barrier", "netvm", 2, 0}]; v != 3 {
		t.Errorf("netvm barrier = %g, want the later row's 3", v)
	}
	if _, ok := res[collKey{"pingpong", "netvm", 2, 8}]; ok {
		t.Error("a pingpong row was kept")
	}
	if got := res.ourDevices(); len(got) != 1 || got[0] != "netvm" {
		t.Errorf("ourDevices = %v, want [netvm]", got)
	}
	if r, ok := collRatio(res, collKey{"coll_barrier", "netvm", 2, 0}); !ok || r != 2 {
		t.Errorf("barrier ratio = %g, %v; want 2 (3 over Open MPI's 1.5)", r, ok)
	}
	if _, ok := collRatio(res, collKey{"coll_bcast", "netvm", 8, 1 << 20}); ok {
		t.Error("bcast ratio without any C MPI row")
	}
}

func TestReadCollResultsBadRow(t *testing.T) {
	for _, in := range []string{
		"coll_barrier,netvm,two,0,1.0,us\n",
		"coll_barrier,netvm,2,0,fast,us\n",
		"coll_barrier,netvm,2,0\n",
	} {
		if _, err := readCollResults(strings.NewReader(in)); err == nil {
			t.Errorf("no error for %q", in)
		}
	}
}

func TestSummarizeColl(t *testing.T) {
	res, err := readCollResults(strings.NewReader(collCSV))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	summarizeColl(&buf, res)
	out := buf.String()
	for _, want := range []string{"Barrier", "Allreduce 8 MiB", "Bcast 1 MiB", "netvm/best", "2.00", "5.00", "!"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Alltoall") {
		t.Errorf("summary has an Alltoall row without data:\n%s", out)
	}
}
