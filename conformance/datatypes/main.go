// Command datatypes is adimpi's derived-datatype conformance program: named
// checks that send and receive non-contiguous data (vectors, 3-D subarrays,
// Go structs, partial messages) between processes with point-to-point calls.
//
//	mpirun -np 4 ./datatypes column   # run one check
//	datatypes -list                   # print the names of every check
//
// The conventions are those of conformance/p2p: every check runs on any
// number of ranks ≥ 1 (with one rank, a rank sends to itself); on success
// rank 0 prints "PASS <check>" on standard output after MPI_Finalize; on a
// failure a rank prints "FAIL <check>: rank R of N: <reason>" on standard
// error and exits 1. With DATATYPES_COUNTERS set in the environment, every
// rank prints the device's counters on standard error before MPI_Finalize.
//
// Every check has a small size, carried eagerly, and a large one (well over
// netvm's default eager limit of 16 KiB), which goes through rendezvous: a
// receive into a non-contiguous type then gets its data in chunks through
// shared memory, and a send from a non-contiguous type writes a gather list
// with process_vm_writev.
package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"slices"
	"unsafe"

	"github.com/adimpi/adimpi/conformance/internal/runner"
	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

// check is one named datatype check.
type check = runner.Check

var checks = []check{
	{Name: "column", MinRanks: 1, Run: checkColumn},
	{Name: "subarray3d", MinRanks: 1, Run: checkSubarray3d},
	{Name: "struct", MinRanks: 1, Run: checkStruct},
	{Name: "mismatch-size", MinRanks: 1, Run: checkMismatchSize},
	{Name: "vector-any", MinRanks: 1, Run: checkVectorAny},
	{Name: "get-elements", MinRanks: 1, Run: checkGetElements},
}

var (
	world      *mpi.Comm
	rank, size int
)

func main() {
	runner.Program{Name: "datatypes", Checks: checks, Setup: setup, After: after}.Main()
}

func setup(w *mpi.Comm) { world, rank, size = w, w.Rank(), w.Size() }

// after checks for leaks and, with DATATYPES_COUNTERS set, prints every
// rank's device counters, to see which paths the device took (eager,
// rendezvous, remote writes, chunks).
func after() {
	runner.CheckLeaks()
	if os.Getenv("DATATYPES_COUNTERS") != "" {
		fmt.Fprintf(os.Stderr, "counters rank %d: %v\n", rank, mpi.Counters())
	}
}

var (
	failf = runner.Failf
	must  = runner.Must
)

func neighbours() (prev, next int) { return (rank + size - 1) % size, (rank + 1) % size }

// commit builds and commits a derived type.
func commit(t *datatype.Type, err error) *datatype.Type {
	must(err, "building a datatype")
	must(t.Commit(), "MPI_Type_commit %s", t)
	return t
}

// f64b is the memory of a float64 slice.
func f64b(s []float64) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*8)
}

// val is the value element (i, j) of rank r's data holds; every value is an
// exact float64, distinct per (r, i, j).
func val(r, i, j int) float64 { return float64(r)*1e9 + float64(i)*64 + float64(j) + 0.5 }

// sentinel is what receive buffers hold before a receive: never a val.
func sentinel(r, i, j int) float64 { return -val(r, i, j) - 0.25 }

func same(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// exchange receives rb from src and sends sb to dest, both with tag, without
// depending on buffering (pure MPIN sends wait for their receive), and
// returns the receive's status.
func exchange(sb mpi.Buffer, dest int, rb mpi.Buffer, src, tag int, what string) mpi.Status {
	rq, err := mpi.IrecvBuf(world, rb, src, tag)
	must(err, "%s: MPI_Irecv", what)
	sq, err := mpi.IsendBuf(world, sb, dest, tag)
	must(err, "%s: MPI_Isend", what)
	sts, err := mpi.Waitall([]*mpi.Request{rq, sq})
	must(err, "%s: MPI_Waitall", what)
	return sts[0]
}

// wantStatus checks a receive's source, tag and byte count.
func wantStatus(st mpi.Status, src, tag, nbytes int, what string) {
	if st.Source != src || st.Tag != tag || st.Bytes() != nbytes {
		failf("%s: status source=%d tag=%d bytes=%d, want source=%d tag=%d bytes=%d", what, st.Source, st.Tag, st.Bytes(), src, tag, nbytes)
	}
	if st.Cancelled || st.Err != nil {
		failf("%s: status cancelled=%v err=%v", what, st.Cancelled, st.Err)
	}
}

// wantCount checks Status.Count for type t, and that the received bytes
// are elems basic elements of t (datatype's Elements, what MPI_Get_elements
// reports). Status.Elements itself is left to the check get-elements, so that
// a fault there shows in one place.
func wantCount(st mpi.Status, t *datatype.Type, count, elems int, what string) {
	if c := st.Count(t); c != count {
		failf("%s: Count(%s) = %d, want %d (bytes %d, type size %d)", what, t, c, count, st.Bytes(), t.Size())
	}
	if e := t.Elements(st.Bytes()); e != elems {
		failf("%s: %s.Elements(%d bytes) = %d, want %d", what, t, st.Bytes(), e, elems)
	}
	if getElements {
		if e := st.Elements(t); e != elems {
			failf("%s: Status.Elements(%s) = %d, want %d (bytes %d; Count is %d)", what, t, e, elems, st.Bytes(), st.Count(t))
		}
	}
}

// getElements makes wantCount check Status.Elements too.
var getElements bool

// checkGetElements runs the receives of mismatch-size, whose messages end
// inside elements of the receive types, and checks MPI_Get_elements
// (Status.Elements) on each.
func checkGetElements() {
	getElements = true
	checkMismatchSize()
}

// wantFloats compares got with want element by element.
func wantFloats(got, want []float64, what string) {
	if len(got) != len(want) {
		failf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !same(got[i], want[i]) {
			failf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// ---------------------------------------------------------------------------
// column: a column of a row-major n×m float64 matrix, Vector(n, 1, m), sent
// around the ring and received into a contiguous slice, into a column of the
// receiver's matrix, from a contiguous slice, and with a negative stride.

const colM = 5

func checkColumn() {
	prev, next := neighbours()
	for _, n := range []int{16, 20000} {
		colT := commit(datatype.Vector(n, 1, colM, datatype.Float64))
		revT := commit(datatype.Vector(n, 1, -colM, datatype.Float64))
		if colT.Size() != n*8 || colT.Extent() != ((n-1)*colM+1)*8 || colT.Contiguous() {
			failf("Vector(%d, 1, %d, float64): size %d extent %d contiguous %v", n, colM, colT.Size(), colT.Extent(), colT.Contiguous())
		}
		if revT.TrueLB() != -(n-1)*colM*8 || revT.Origin() != (n-1)*colM*8 {
			failf("Vector(%d, 1, -%d, float64): TrueLB %d Origin %d, want %d, %d", n, colM, revT.TrueLB(), revT.Origin(), -(n-1)*colM*8, (n-1)*colM*8)
		}
		sc, pc, rc := rank%colM, prev%colM, (rank+2)%colM // column sent by me, by prev; column I receive into
		mat := make([]float64, n*colM)
		for i := range n {
			for j := range colM {
				mat[i*colM+j] = val(rank, i, j)
			}
		}
		orig := slices.Clone(mat)
		colVals := make([]float64, n) // my column sc, contiguous
		for i := range n {
			colVals[i] = mat[i*colM+sc]
		}
		fresh := func() []float64 { // a receiver matrix of sentinels
			r := make([]float64, n*colM)
			for i := range n {
				for j := range colM {
					r[i*colM+j] = sentinel(rank, i, j)
				}
			}
			return r
		}
		// wantMat checks rmat: column rc holds prev's column pc (row i of it
		// at row rowOf(i)), every other element its sentinel.
		wantMat := func(rmat []float64, rowOf func(int) int, what string) {
			want := fresh()
			for i := range n {
				want[rowOf(i)*colM+rc] = val(prev, i, pc)
			}
			for k := range rmat {
				if !same(rmat[k], want[k]) {
					failf("%s (n=%d): receiver matrix element (%d, %d) is %v, want %v", what, n, k/colM, k%colM, rmat[k], want[k])
				}
			}
		}
		tag := n % 1000

		// (a) column → contiguous slice (3 extra elements that must stay).
		got := make([]float64, n+3)
		for i := range got {
			got[i] = sentinel(rank, i, 99)
		}
		st := exchange(mpi.Typed(f64b(mat[sc:]), 1, colT), next, mpi.Typed(f64b(got), n, datatype.Float64), prev, tag, "column→contiguous")
		wantStatus(st, prev, tag, n*8, "column→contiguous")
		wantCount(st, colT, 1, n, "column→contiguous")
		wantCount(st, datatype.Float64, n, n, "column→contiguous")
		want := make([]float64, n+3)
		for i := range n {
			want[i] = val(prev, i, pc)
		}
		for i := n; i < n+3; i++ {
			want[i] = sentinel(rank, i, 99)
		}
		wantFloats(got, want, fmt.Sprintf("column→contiguous (n=%d)", n))

		// (b) column → column rc of the receiver's matrix.
		rmat := fresh()
		st = exchange(mpi.Typed(f64b(mat[sc:]), 1, colT), next, mpi.Typed(f64b(rmat[rc:]), 1, colT), prev, tag+1, "column→column")
		wantStatus(st, prev, tag+1, n*8, "column→column")
		wantMat(rmat, func(i int) int { return i }, "column→column")

		// (c) contiguous slice → column rc.
		rmat = fresh()
		st = exchange(mpi.Slice(colVals), next, mpi.Typed(f64b(rmat[rc:]), 1, colT), prev, tag+2, "contiguous→column")
		wantStatus(st, prev, tag+2, n*8, "contiguous→column")
		wantCount(st, colT, 1, n, "contiguous→column")
		wantMat(rmat, func(i int) int { return i }, "contiguous→column")

		// (d) negative stride: the column bottom-up into a contiguous slice,
		// and a column top-down into a bottom-up column.
		clear(got)
		st = exchange(mpi.Typed(f64b(mat[sc:]), 1, revT), next, mpi.Typed(f64b(got[:n]), n, datatype.Float64), prev, tag+3, "reversed column→contiguous")
		wantStatus(st, prev, tag+3, n*8, "reversed column→contiguous")
		for i := range n {
			if !same(got[i], val(prev, n-1-i, pc)) {
				failf("reversed column→contiguous (n=%d): element %d is %v, want %v", n, i, got[i], val(prev, n-1-i, pc))
			}
		}
		rmat = fresh()
		st = exchange(mpi.Typed(f64b(mat[sc:]), 1, colT), next, mpi.Typed(f64b(rmat[rc:]), 1, revT), prev, tag+4, "column→reversed column")
		wantStatus(st, prev, tag+4, n*8, "column→reversed column")
		wantMat(rmat, func(i int) int { return n - 1 - i }, "column→reversed column")

		wantFloats(mat, orig, fmt.Sprintf("sender's matrix after the sends (n=%d)", n))
	}
}

// ---------------------------------------------------------------------------
// subarray3d: a 3-D array with a halo of one cell on every side; along each
// dimension every rank sends its two outermost interior faces to its ring
// neighbours and receives theirs into its halo faces, with Subarray types in
// C and in Fortran order.

func checkSubarray3d() {
	prev, next := neighbours()
	for _, order := range []datatype.Order{datatype.OrderC, datatype.OrderFortran} {
		// Small faces go eagerly; the large ones through rendezvous, and the
		// last size's dimension-0 face (75 KiB) spans more than one 64 KiB
		// chunk of netvm's ring, so that a chunk ends inside a block.
		for _, in := range [][3]int{{4, 3, 5}, {64, 48, 40}, {40, 100, 96}} {
			dims := [3]int{in[0] + 2, in[1] + 2, in[2] + 2}
			idx := func(x [3]int) int {
				if order == datatype.OrderC {
					return (x[0]*dims[1]+x[1])*dims[2] + x[2]
				}
				return x[0] + dims[0]*(x[1]+dims[1]*x[2])
			}
			v3 := func(r int, x [3]int) float64 { return val(r, x[0]*128+x[1], x[2]) }
			s3 := func(x [3]int) float64 { return sentinel(rank, x[0]*128+x[1], x[2]) }
			interior := func(x [3]int, d int) bool { return x[d] >= 1 && x[d] <= in[d] }
			arr := make([]float64, dims[0]*dims[1]*dims[2])
			each := func(fn func(x [3]int)) {
				for a := range dims[0] {
					for b := range dims[1] {
						for c := range dims[2] {
							fn([3]int{a, b, c})
						}
					}
				}
			}
			each(func(x [3]int) {
				if interior(x, 0) && interior(x, 1) && interior(x, 2) {
					arr[idx(x)] = v3(rank, x)
				} else {
					arr[idx(x)] = s3(x)
				}
			})
			mem := f64b(arr)
			what := fmt.Sprintf("order %v, interior %v", order, in)
			for d := range 3 {
				sub := in
				sub[d] = 1
				face := func(at int) *datatype.Type {
					starts := []int{1, 1, 1}
					starts[d] = at
					return commit(datatype.Subarray(dims[:], sub[:], starts, order, datatype.Float64))
				}
				sendHi, recvLo, sendLo, recvHi := face(in[d]), face(0), face(1), face(in[d]+1)
				nb := sub[0] * sub[1] * sub[2] * 8
				if sendHi.Size() != nb || sendHi.Extent() != len(mem) {
					failf("%s: Subarray face of dimension %d: size %d extent %d, want %d, %d", what, d, sendHi.Size(), sendHi.Extent(), nb, len(mem))
				}
				up, down := 100+2*d, 101+2*d
				reqs := make([]*mpi.Request, 4)
				var err error
				reqs[0], err = mpi.IrecvBuf(world, mpi.Typed(mem, 1, recvLo), prev, up)
				must(err, "%s: MPI_Irecv low halo of dimension %d", what, d)
				reqs[1], err = mpi.IrecvBuf(world, mpi.Typed(mem, 1, recvHi), next, down)
				must(err, "%s: MPI_Irecv high halo of dimension %d", what, d)
				reqs[2], err = mpi.IsendBuf(world, mpi.Typed(mem, 1, sendHi), next, up)
				must(err, "%s: MPI_Isend high face of dimension %d", what, d)
				reqs[3], err = mpi.IsendBuf(world, mpi.Typed(mem, 1, sendLo), prev, down)
				must(err, "%s: MPI_Isend low face of dimension %d", what, d)
				sts, err := mpi.Waitall(reqs)
				must(err, "%s: MPI_Waitall, dimension %d", what, d)
				wantStatus(sts[0], prev, up, nb, fmt.Sprintf("%s: low halo of dimension %d", what, d))
				wantStatus(sts[1], next, down, nb, fmt.Sprintf("%s: high halo of dimension %d", what, d))
				wantCount(sts[0], recvLo, 1, nb/8, what)
			}
			// Every interior cell is unchanged; a halo cell with exactly one
			// coordinate outside holds the neighbour's face; edges and
			// corners keep their sentinels.
			each(func(x [3]int) {
				var want float64
				outside := -1
				n := 0
				for d := range 3 {
					if !interior(x, d) {
						outside, n = d, n+1
					}
				}
				switch {
				case n == 0:
					want = v3(rank, x)
				case n == 1 && x[outside] == 0:
					y := x
					y[outside] = in[outside]
					want = v3(prev, y)
				case n == 1:
					y := x
					y[outside] = 1
					want = v3(next, y)
				default:
					want = s3(x)
				}
				if got := arr[idx(x)]; !same(got, want) {
					failf("%s: cell %v is %v, want %v", what, x, got, want)
				}
			})
		}
	}
}

// ---------------------------------------------------------------------------
// struct: arrays of a Go struct with padding, described by FromStruct and by
// Struct (+ Resized), sent whole, partly (some fields), and received as
// MPI_PACKED.

type rec struct {
	A int32
	B float64
	C [3]int16
	D int32
}

const recData = 4 + 8 + 6 + 4 // data bytes of one rec

func recVal(r, k int) rec {
	return rec{A: int32(r*100000 + k), B: float64(r)*1e6 + float64(k) + 0.125, C: [3]int16{int16(k), int16(-k), int16(r)}, D: int32(^k)}
}

func recBytes(s []rec) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(rec{})))
}

// recArray makes k+1 recs whose every byte is fill, then (if r ≥ 0) sets the
// fields of the first k to recVal(r, ·), so padding keeps fill.
func recArray(k int, fill byte, r int) []rec {
	s := make([]rec, k+1)
	b := recBytes(s)
	for i := range b {
		b[i] = fill
	}
	if r >= 0 {
		for i := range k {
			s[i] = recVal(r, i)
		}
	}
	return s
}

// wantRecs checks got against want byte for byte, naming the field of the
// first difference. fields says which fields were received: the others, the
// padding and the element after the first k must still hold 0xEE.
func wantRecs(got []rec, k, src int, fields string, what string) {
	exp := recArray(k, 0xEE, -1)
	for i := range k {
		v := recVal(src, i)
		for _, f := range fields {
			switch f {
			case 'A':
				exp[i].A = v.A
			case 'B':
				exp[i].B = v.B
			case 'C':
				exp[i].C = v.C
			case 'D':
				exp[i].D = v.D
			}
		}
	}
	gb, eb := recBytes(got), recBytes(exp)
	if bytes.Equal(gb, eb) {
		return
	}
	sz := int(unsafe.Sizeof(rec{}))
	for i := range gb {
		if gb[i] != eb[i] {
			off := i % sz
			field := "padding"
			switch {
			case off < 4:
				field = "A"
			case off >= 8 && off < 16:
				field = "B"
			case off >= 16 && off < 22:
				field = "C"
			case off >= 24 && off < 28:
				field = "D"
			}
			failf("%s: element %d, byte %d (field %s) is %#02x, want %#02x; element is %+v, want %+v", what, i/sz, off, field, gb[i], eb[i], got[i/sz], exp[i/sz])
		}
	}
}

func checkStruct() {
	prev, next := neighbours()
	sz := int(unsafe.Sizeof(rec{}))
	fromT, err := datatype.FromStruct(rec{})
	must(err, "FromStruct(rec{})")
	if !fromT.Committed() || fromT.Size() != recData || fromT.Extent() != sz {
		failf("FromStruct(rec{}): committed %v size %d extent %d, want true, %d, %d", fromT.Committed(), fromT.Size(), fromT.Extent(), recData, sz)
	}
	offs := []int{int(unsafe.Offsetof(rec{}.A)), int(unsafe.Offsetof(rec{}.B)), int(unsafe.Offsetof(rec{}.C)), int(unsafe.Offsetof(rec{}.D))}
	structT := commit(datatype.Struct([]int{1, 1, 3, 1}, offs, []*datatype.Type{datatype.Int32, datatype.Float64, datatype.Int16, datatype.Int32}))
	if structT.Extent() != sz {
		failf("Struct of rec's fields: extent %d, want %d (padded to float64 alignment)", structT.Extent(), sz)
	}
	resT := commit(datatype.Resized(structT, 0, sz))
	// Fields A and C only, resized to a whole rec.
	partT := commit(datatype.Resized(commit(datatype.Struct([]int{1, 3}, []int{offs[0], offs[2]}, []*datatype.Type{datatype.Int32, datatype.Int16})), 0, sz))
	if partT.Size() != 10 || partT.Extent() != sz {
		failf("resized partial struct: size %d extent %d, want 10, %d", partT.Size(), partT.Extent(), sz)
	}

	for _, k := range []int{10, 3000} {
		send := recArray(k, 0xAB, rank)
		orig := slices.Clone(recBytes(send))
		what := func(s string) string { return fmt.Sprintf("%s (%d elements)", s, k) }

		// FromStruct → FromStruct.
		got := recArray(k, 0xEE, -1)
		st := exchange(mpi.Typed(recBytes(send), k, fromT), next, mpi.Typed(recBytes(got), k, fromT), prev, 1, what("FromStruct"))
		wantStatus(st, prev, 1, k*recData, what("FromStruct"))
		wantCount(st, fromT, k, k*6, what("FromStruct"))
		wantRecs(got, k, prev, "ABCD", what("FromStruct→FromStruct"))

		// FromStruct → Struct-built and resized.
		got = recArray(k, 0xEE, -1)
		st = exchange(mpi.Typed(recBytes(send), k, fromT), next, mpi.Typed(recBytes(got), k, resT), prev, 2, what("FromStruct→Resized(Struct)"))
		wantStatus(st, prev, 2, k*recData, what("FromStruct→Resized(Struct)"))
		wantCount(st, resT, k, k*6, what("FromStruct→Resized(Struct)"))
		wantRecs(got, k, prev, "ABCD", what("FromStruct→Resized(Struct)"))

		// Struct-built (not resized) → FromStruct.
		got = recArray(k, 0xEE, -1)
		st = exchange(mpi.Typed(recBytes(send), k, structT), next, mpi.Typed(recBytes(got), k, fromT), prev, 3, what("Struct→FromStruct"))
		wantStatus(st, prev, 3, k*recData, what("Struct→FromStruct"))
		wantRecs(got, k, prev, "ABCD", what("Struct→FromStruct"))

		// Only fields A and C.
		got = recArray(k, 0xEE, -1)
		st = exchange(mpi.Typed(recBytes(send), k, partT), next, mpi.Typed(recBytes(got), k, partT), prev, 4, what("partial struct"))
		wantStatus(st, prev, 4, k*10, what("partial struct"))
		wantCount(st, partT, k, k*4, what("partial struct"))
		wantRecs(got, k, prev, "AC", what("partial struct"))

		// FromStruct → MPI_PACKED, compared with Pack and then unpacked.
		packed := make([]byte, k*recData+16)
		for i := range packed {
			packed[i] = 0xEE
		}
		st = exchange(mpi.Typed(recBytes(send), k, fromT), next, mpi.Typed(packed, len(packed), datatype.Packed), prev, 5, what("FromStruct→MPI_PACKED"))
		wantStatus(st, prev, 5, k*recData, what("FromStruct→MPI_PACKED"))
		want := make([]byte, k*recData)
		pos, err := datatype.Pack(want, 0, recBytes(recArray(k, 0, prev)), k, fromT)
		must(err, "MPI_Pack")
		if pos != k*recData {
			failf("MPI_Pack of %d recs returned position %d, want %d", k, pos, k*recData)
		}
		if !bytes.Equal(packed[:pos], want) {
			i := 0
			for packed[i] == want[i] {
				i++
			}
			failf("%s: packed byte %d is %#02x, MPI_Pack gives %#02x", what("FromStruct→MPI_PACKED"), i, packed[i], want[i])
		}
		if i := slices.IndexFunc(packed[pos:], func(b byte) bool { return b != 0xEE }); i >= 0 {
			failf("%s: byte %d after the message changed", what("FromStruct→MPI_PACKED"), pos+i)
		}
		got = recArray(k, 0xEE, -1)
		pos, err = datatype.Unpack(packed, 0, recBytes(got), k, fromT)
		must(err, "MPI_Unpack")
		if pos != k*recData {
			failf("MPI_Unpack of %d recs returned position %d", k, pos)
		}
		wantRecs(got, k, prev, "ABCD", what("MPI_PACKED unpacked"))

		if !bytes.Equal(recBytes(send), orig) {
			failf("%s: the send buffer changed", what("struct"))
		}
	}
}

// ---------------------------------------------------------------------------
// mismatch-size: a receive whose buffer holds more than the message fills
// only what arrived.

// layout gives the float64 index, in a buffer, of each packed float64 of
// count elements of a vector type (count blocks of bl, stride st, extent ext
// float64s).
type layout struct{ blocks, bl, stride, ext int }

func (l layout) pos(k int) int {
	per := l.blocks * l.bl
	e, r := k/per, k%per
	return e*l.ext + (r/l.bl)*l.stride + r%l.bl
}

func checkMismatchSize() {
	prev, next := neighbours()
	cases := []struct {
		name         string
		l            layout // receive type: Vector(blocks, bl, stride, float64); blocks 0: contiguous float64
		count        int    // receive count
		sent         int    // float64s sent
		sendStride   int    // > 1: send from a Vector with this stride
		wantCountVal int    // Count(receive type)
	}{
		{"whole elements", layout{3, 2, 4, 10}, 4, 12, 0, 2},
		{"a partial element", layout{3, 2, 4, 10}, 4, 13, 0, mpi.Undefined},
		{"a partial element, strided send", layout{3, 2, 4, 10}, 4, 13, 3, mpi.Undefined},
		{"nothing", layout{3, 2, 4, 10}, 4, 0, 0, 0},
		{"large, whole elements", layout{3, 2, 4, 10}, 1000, 3000, 0, 500},
		{"large, a partial element", layout{3, 2, 4, 10}, 1000, 3001, 0, mpi.Undefined},
		{"large, a partial element, strided send", layout{3, 2, 4, 10}, 1000, 3001, 2, mpi.Undefined},
		{"several chunks, a partial element", layout{3, 2, 4, 10}, 4000, 12001, 0, mpi.Undefined},
		{"several chunks, a partial element, strided send", layout{3, 2, 4, 10}, 4000, 12001, 3, mpi.Undefined},
		{"one big element", layout{4000, 1, 2, 7999}, 1, 2777, 0, mpi.Undefined},
		{"contiguous", layout{0, 1, 1, 1}, 100, 37, 0, 37},
		{"large contiguous", layout{0, 1, 1, 1}, 5000, 4001, 0, 4001},
		{"large contiguous, strided send", layout{0, 1, 1, 1}, 12000, 10001, 2, 10001},
	}
	for ci, c := range cases {
		what := fmt.Sprintf("%s (receive %d elements, %d float64s sent)", c.name, c.count, c.sent)
		rt := datatype.Float64
		if c.l.blocks > 0 {
			rt = commit(datatype.Vector(c.l.blocks, c.l.bl, c.l.stride, datatype.Float64))
		}
		if (c.l.blocks > 0 && rt.Size() != c.l.blocks*c.l.bl*8) || rt.Extent() != c.l.ext*8 {
			failf("%s: receive type %s has size %d extent %d", what, rt, rt.Size(), rt.Extent())
		}
		capacity := rt.Span(c.count)/8 + 7 // float64s in the receive buffer, with 7 beyond the span
		buf := make([]float64, capacity)
		for i := range buf {
			buf[i] = sentinel(rank, i, ci)
		}
		// What was sent: val(rank, k, ci) for k < sent, from a contiguous
		// slice or every sendStride-th element of a longer one.
		var sb mpi.Buffer
		if c.sendStride > 1 {
			src := make([]float64, max(1, (c.sent-1)*c.sendStride+1))
			for k := range c.sent {
				src[k*c.sendStride] = val(rank, k, ci)
			}
			st := commit(datatype.Vector(c.sent, 1, c.sendStride, datatype.Float64))
			sb = mpi.Typed(f64b(src), 1, st)
		} else {
			src := make([]float64, c.sent)
			for k := range src {
				src[k] = val(rank, k, ci)
			}
			sb = mpi.Slice(src)
		}
		st := exchange(sb, next, mpi.Typed(f64b(buf), c.count, rt), prev, 10+ci, what)
		wantStatus(st, prev, 10+ci, c.sent*8, what)
		wantCount(st, rt, c.wantCountVal, c.sent, what)
		want := make([]float64, capacity)
		for i := range want {
			want[i] = sentinel(rank, i, ci)
		}
		l := c.l
		if l.blocks == 0 {
			l = layout{1, 1, 1, 1}
		}
		for k := range c.sent {
			want[l.pos(k)] = val(prev, k, ci)
		}
		for i := range buf {
			if !same(buf[i], want[i]) {
				state := "was to stay untouched"
				if !same(want[i], sentinel(rank, i, ci)) {
					state = "should hold received data"
				}
				failf("%s: receive buffer float64 %d (byte %d) is %v, want %v (it %s)", what, i, i*8, buf[i], want[i], state)
			}
		}
	}
}

// ---------------------------------------------------------------------------
// vector-any: every rank sends a small and a large strided column to rank 0
// (itself included), which receives them with AnySource and AnyTag into
// another strided layout, first into pre-posted receives, then with blocking
// receives of messages that may already be waiting.

const (
	vaM      = 4  // columns of the senders' matrices
	vaStride = 3  // stride of rank 0's receive type
	vaGo     = 50 // tag of rank 0's go-ahead for the second round
)

var vaSizes = [2]int{16, 20000}

func vaTag(round, src, big int) int { return 1000*round + 2*src + big }

func checkVectorAny() {
	maxN := vaSizes[1]
	recvT := commit(datatype.Vector(maxN, 1, vaStride, datatype.Float64))
	mats := [2][]float64{}
	sendT := [2]*datatype.Type{}
	for b, n := range vaSizes {
		mats[b] = make([]float64, n*vaM)
		for i := range n {
			for j := range vaM {
				mats[b][i*vaM+j] = val(rank, i, j)
			}
		}
		sendT[b] = commit(datatype.Vector(n, 1, vaM, datatype.Float64))
	}
	sends := func(round int) []*mpi.Request {
		var reqs []*mpi.Request
		for b := range vaSizes {
			q, err := mpi.IsendBuf(world, mpi.Typed(f64b(mats[b][rank%vaM:]), 1, sendT[b]), 0, vaTag(round, rank, b))
			must(err, "vector-any: MPI_Isend round %d size %d", round, vaSizes[b])
			reqs = append(reqs, q)
		}
		return reqs
	}
	newBuf := func() []float64 {
		buf := make([]float64, (maxN-1)*vaStride+1+5)
		for i := range buf {
			buf[i] = sentinel(0, i, 7)
		}
		return buf
	}
	// verify checks the i-th received message of a round. got counts the
	// messages seen per source, for the non-overtaking check.
	verify := func(round, i int, st mpi.Status, buf []float64, got []int) {
		what := fmt.Sprintf("round %d, receive %d", round, i)
		if st.Source < 0 || st.Source >= size {
			failf("%s: status source %d", what, st.Source)
		}
		src := st.Source
		b := got[src]
		if b > 1 {
			failf("%s: a third message from rank %d", what, src)
		}
		got[src]++
		// Messages from one source match in the order sent: small first.
		wantStatus(st, src, vaTag(round, src, b), vaSizes[b]*8, what)
		n := vaSizes[b]
		wantCount(st, datatype.Float64, n, n, what)
		if b == 1 {
			wantCount(st, recvT, 1, n, what)
		} else {
			wantCount(st, recvT, mpi.Undefined, n, what)
		}
		for k := range buf {
			want := sentinel(0, k, 7)
			if k%vaStride == 0 && k/vaStride < n {
				want = val(src, k/vaStride, src%vaM)
			}
			if !same(buf[k], want) {
				failf("%s (from rank %d, %d float64s): receive buffer element %d is %v, want %v", what, src, n, k, buf[k], want)
			}
		}
	}

	// goAll: rank 0 starts sending the go-ahead of a round to every other
	// rank and returns the requests; the others wait for it.
	goAll := func(round int) []*mpi.Request {
		if rank != 0 {
			_, err := mpi.Recv(world, []int32{0}, 0, vaGo+round)
			must(err, "vector-any: MPI_Recv go of round %d", round)
			return nil
		}
		var reqs []*mpi.Request
		for r := 1; r < size; r++ {
			q, err := mpi.Isend(world, []int32{int32(round)}, r, vaGo+round)
			must(err, "vector-any: MPI_Isend go of round %d to %d", round, r)
			reqs = append(reqs, q)
		}
		return reqs
	}

	// Round 1: rank 0 pre-posts every receive before anything is sent.
	if rank == 0 {
		nmsg := 2 * size
		bufs := make([][]float64, nmsg)
		reqs := make([]*mpi.Request, nmsg)
		for i := range reqs {
			bufs[i] = newBuf()
			var err error
			reqs[i], err = mpi.IrecvBuf(world, mpi.Typed(f64b(bufs[i]), 1, recvT), mpi.AnySource, mpi.AnyTag)
			must(err, "vector-any: MPI_Irecv %d (AnySource, AnyTag)", i)
		}
		goReqs := goAll(1)
		own := sends(1)
		sts, err := mpi.Waitall(reqs)
		must(err, "vector-any: MPI_Waitall of round 1's receives")
		got := make([]int, size)
		for i, st := range sts {
			verify(1, i, st, bufs[i], got)
		}
		_, err = mpi.Waitall(append(own, goReqs...))
		must(err, "vector-any: MPI_Waitall of rank 0's sends")
	} else {
		goAll(1)
		_, err := mpi.Waitall(sends(1))
		must(err, "vector-any: MPI_Waitall of round 1's sends")
	}

	// Round 2: once rank 0 has matched all of round 1 (so that no round-2
	// message can meet a round-1 receive), everyone sends at once and rank 0
	// receives one message at a time.
	goReqs := goAll(2)
	own := append(sends(2), goReqs...)
	if rank == 0 {
		got := make([]int, size)
		for i := range 2 * size {
			buf := newBuf()
			st, err := mpi.RecvBuf(world, mpi.Typed(f64b(buf), 1, recvT), mpi.AnySource, mpi.AnyTag)
			must(err, "vector-any: MPI_Recv %d (AnySource, AnyTag)", i)
			verify(2, i, st, buf, got)
		}
	}
	_, err := mpi.Waitall(own)
	must(err, "vector-any: MPI_Waitall of round 2's sends")
	for b, n := range vaSizes {
		for i := range n {
			for j := range vaM {
				if !same(mats[b][i*vaM+j], val(rank, i, j)) {
					failf("vector-any: the send matrix changed at (%d, %d)", i, j)
				}
			}
		}
	}
}
