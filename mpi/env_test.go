package mpi_test

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

func TestThreadLevels(t *testing.T) {
	if l, err := mpi.QueryThread(); err != nil || l != mpi.ThreadMultiple {
		t.Fatalf("QueryThread = %v, %v; want MPI_THREAD_MULTIPLE", l, err)
	}
	if _, err := mpi.InitThread(mpi.ThreadMultiple + 1); !errors.Is(err, mpi.ErrArg) {
		t.Fatalf("InitThread(4): %v, want ErrArg", err)
	}
	if _, err := mpi.InitThread(mpi.ThreadSingle); err == nil {
		t.Fatal("InitThread after Init succeeded")
	}
	// Tests run in their own goroutines, not in TestMain's, which called Init.
	if main, err := mpi.IsThreadMain(); err != nil || main {
		t.Fatalf("IsThreadMain in a test's goroutine = %v, %v; want false", main, err)
	}
}

func TestVersionAndNames(t *testing.T) {
	if v, sv := mpi.GetVersion(); v != 4 || sv != 0 {
		t.Fatalf("GetVersion = %d.%d", v, sv)
	}
	lib := mpi.GetLibraryVersion()
	if !strings.HasPrefix(lib, "adimpi ") || !strings.Contains(lib, runtime.Version()) || !strings.Contains(lib, "netvm") {
		t.Fatalf("GetLibraryVersion = %q: want adimpi, the Go version and the devices", lib)
	}
	if h, _, _ := mpi.InfoEnv().Get("host"); h != mpi.ProcessorName() || h == "" {
		t.Fatalf("InfoEnv host = %q, want ProcessorName %q", h, mpi.ProcessorName())
	}
	if err := mpi.Pcontrol(2); err != nil {
		t.Fatal(err)
	}
}

func TestPredefinedAttributes(t *testing.T) {
	for _, c := range []*mpi.Comm{mpi.World(), mpi.Self()} {
		if v, ok := c.Attr(mpi.KeyTagUB); !ok || v != mpi.TagUB {
			t.Errorf("%s: TAG_UB = %v, %v", c.Name(), v, ok)
		}
		if v, ok := c.Attr(mpi.KeyWtimeIsGlobal); !ok || v != false {
			t.Errorf("%s: WTIME_IS_GLOBAL = %v, %v; want false", c.Name(), v, ok)
		}
		if v, ok := c.Attr(mpi.KeyUniverseSize); !ok || v != 1 {
			t.Errorf("%s: UNIVERSE_SIZE = %v, %v; want 1", c.Name(), v, ok)
		}
		if v, ok := c.Attr(mpi.KeyHost); !ok || v != mpi.ProcNull {
			t.Errorf("%s: HOST = %v, %v; want ProcNull", c.Name(), v, ok)
		}
	}
	w := mpi.World()
	t.Setenv("ADIMPI_APPNUM", "")
	os.Unsetenv("ADIMPI_APPNUM")
	if v, ok := w.Attr(mpi.KeyAppNum); ok {
		t.Errorf("APPNUM without ADIMPI_APPNUM = %v; want absent", v)
	}
	t.Setenv("ADIMPI_APPNUM", "2")
	if v, ok := w.Attr(mpi.KeyAppNum); !ok || v != 2 {
		t.Errorf("APPNUM with ADIMPI_APPNUM=2 = %v, %v", v, ok)
	}
	if err := w.SetAttr(mpi.KeyTagUB, 5); !errors.Is(err, mpi.ErrArg) {
		t.Errorf("SetAttr(TAG_UB): %v, want ErrArg", err)
	}
	if err := w.DeleteAttr(mpi.KeyTagUB); !errors.Is(err, mpi.ErrArg) {
		t.Errorf("DeleteAttr(TAG_UB): %v, want ErrArg", err)
	}
}

func TestInfo(t *testing.T) {
	i := mpi.NewInfo()
	for _, kv := range [][2]string{{"b", "1"}, {"a", "2"}, {"c", "3"}, {"b", "4"}} {
		if err := i.Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := i.NKeys(); n != 3 {
		t.Fatalf("NKeys = %d, want 3", n)
	}
	for n, want := range []string{"b", "a", "c"} {
		if k, err := i.NthKey(n); err != nil || k != want {
			t.Fatalf("NthKey(%d) = %q, %v; want %q", n, k, err, want)
		}
	}
	if v, ok, _ := i.Get("b"); !ok || v != "4" {
		t.Fatalf("Get(b) = %q, %v; want 4", v, ok)
	}
	d, err := i.Dup()
	if err != nil {
		t.Fatal(err)
	}
	if err := i.Delete("a"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := i.Get("a"); ok {
		t.Fatal("a is still set after Delete")
	}
	if k, _ := i.NthKey(1); k != "c" {
		t.Fatalf("after Delete(a), NthKey(1) = %q, want c", k)
	}
	if v, ok, _ := d.Get("a"); !ok || v != "2" {
		t.Fatalf("the Dup lost a: %q, %v", v, ok)
	}
	if err := i.Delete("a"); !errors.Is(err, mpi.ErrArg) {
		t.Fatalf("Delete of a missing key: %v, want ErrArg", err)
	}
	if _, err := i.NthKey(2); !errors.Is(err, mpi.ErrArg) {
		t.Fatalf("NthKey(2) of 2 keys: %v, want ErrArg", err)
	}
	if err := i.Set("", "x"); !errors.Is(err, mpi.ErrArg) {
		t.Fatalf("Set of an empty key: %v, want ErrArg", err)
	}
	if err := i.Set(strings.Repeat("k", mpi.InfoMaxKey+1), "x"); !errors.Is(err, mpi.ErrArg) {
		t.Fatalf("Set of a key too long: %v, want ErrArg", err)
	}
	if err := i.Free(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := i.Get("b"); !errors.Is(err, mpi.ErrArg) {
		t.Fatalf("Get after Free: %v, want ErrArg", err)
	}
	env := mpi.InfoEnv()
	for k, want := range map[string]string{"maxprocs": "1", "thread_level": "MPI_THREAD_MULTIPLE", "arch": runtime.GOOS + "/" + runtime.GOARCH, "command": os.Args[0]} {
		if v, ok, _ := env.Get(k); !ok || v != want {
			t.Errorf("InfoEnv %s = %q, %v; want %q", k, v, ok, want)
		}
	}
}

// TestTypedSliceChecks: TypedSlice and View refuse a datatype that does
// not describe one element of the Go type, and Go types with pointers,
// naming the call and the sizes.
func TestTypedSliceChecks(t *testing.T) {
	type pt struct {
		X int32
		Y float64
	}
	pty, err := datatype.FromStruct(pt{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := mpi.TypedSlice(make([]pt, 3), pty)
	if err != nil || b.Count != 3 || len(b.Mem) != 48 {
		t.Fatalf("TypedSlice of 3 pt: %+v, %v", b, err)
	}
	_, err = mpi.TypedSlice(make([]int32, 3), pty)
	if !errors.Is(err, mpi.ErrType) || !strings.Contains(err.Error(), "TypedSlice") || !strings.Contains(err.Error(), "extent 16") || !strings.Contains(err.Error(), "int32 is 4 bytes") {
		t.Fatalf("TypedSlice of int32 with a 16-byte type: %v", err)
	}
	type withPtr struct {
		P *int
		X int64
	}
	two, _ := datatype.Contiguous(2, datatype.Int64)
	_ = two.Commit()
	if _, err := mpi.TypedSlice(make([]withPtr, 1), two); !errors.Is(err, mpi.ErrType) || !strings.Contains(err.Error(), "pointers") {
		t.Fatalf("TypedSlice of a struct with a pointer: %v", err)
	}
	if _, err := mpi.TypedSlice(make([]pt, 1), nil); !errors.Is(err, mpi.ErrType) {
		t.Fatalf("TypedSlice with a nil type: %v", err)
	}
	if _, err := mpi.View[int64](b); !errors.Is(err, mpi.ErrType) {
		t.Fatalf("View of pt as int64: %v", err)
	}
	v, err := mpi.View[pt](b)
	if err != nil || len(v) != 3 {
		t.Fatalf("View of pt: %d elements, %v", len(v), err)
	}
	// A struct goes to self and back through TypedSlice alone.
	out := []pt{{1, 1.5}, {2, 2.5}}
	in := make([]pt, 2)
	sb, _ := mpi.TypedSlice(out, pty)
	rb, _ := mpi.TypedSlice(in, pty)
	if _, err := mpi.SendrecvBuf(mpi.World(), sb, 0, 3, rb, 0, 3); err != nil {
		t.Fatal(err)
	}
	if in[0] != out[0] || in[1] != out[1] {
		t.Fatalf("received %v, want %v", in, out)
	}
}
