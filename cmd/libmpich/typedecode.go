//go:build cgo

package main

/*
#include <stdint.h>
*/
import "C"

import (
	"unsafe"

	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

// Datatype decoding (MPI_Type_get_envelope, MPI_Type_get_contents and
// their large-count forms): the arguments of the constructor that made a
// type, in the layout of the form that made it (largeTypes).

// combinerCode are MPICH's combiner numbers.
var combinerCode = map[datatype.Combiner]C.int{
	datatype.CombinerNamed: 1, datatype.CombinerDup: 2, datatype.CombinerContiguous: 3,
	datatype.CombinerVector: 4, datatype.CombinerHvector: 6, datatype.CombinerIndexed: 7,
	datatype.CombinerHindexed: 9, datatype.CombinerIndexedBlock: 10, datatype.CombinerStruct: 12,
	datatype.CombinerSubarray: 13, datatype.CombinerDarray: 14, datatype.CombinerResized: 18,
	datatype.CombinerHindexedBlock: 19,
}

// mpiConstants rewrites the order and distribution codes in a subarray's
// or darray's integers from package datatype's values to MPI's.
func mpiConstants(c datatype.Combiner, is []int) []int {
	order := func(i int) {
		if i < len(is) {
			is[i] = 56 + is[i] // MPI_ORDER_C, MPI_ORDER_FORTRAN
		}
	}
	switch c {
	case datatype.CombinerSubarray:
		order(len(is) - 1)
	case datatype.CombinerDarray:
		if len(is) < 3 {
			return is
		}
		nd := is[2]
		for i := 3 + nd; i < 3+2*nd && i < len(is); i++ {
			is[i] = map[int]int{int(datatype.DistributeBlock): 121, int(datatype.DistributeCyclic): 122, int(datatype.DistributeNone): 123}[is[i]]
		}
		order(len(is) - 1)
	}
	return is
}

// decoded is what MPI_Type_get_envelope and MPI_Type_get_contents return
// for a type: the arguments of the constructor that made it, with MPI's
// constants. For a type of a large-count constructor the counts and
// displacements are in counts (MPI-4's large-count table: every count,
// displacement, stride, lb and extent; a subarray keeps ndims and order in
// ints, a darray all but its global sizes), for any other in ints and
// addrs.
type decoded struct {
	ints, addrs, counts []int
	types               []*datatype.Type
	combiner            C.int
	large               bool
}

func decode(t *datatype.Type) decoded {
	e := t.GetEnvelope()
	d := decoded{combiner: combinerCode[e.Combiner]}
	is, as, ts, err := t.GetContents()
	if err != nil { // a predefined type: no arguments
		return d
	}
	is = mpiConstants(e.Combiner, is)
	d.types = ts
	if _, ok := largeTypes.Load(t); !ok {
		d.ints, d.addrs = is, as
		return d
	}
	d.large = true
	switch e.Combiner {
	case datatype.CombinerSubarray: // ndims, sizes, subsizes, starts, order
		n := is[0]
		d.ints, d.counts = []int{n, is[len(is)-1]}, is[1:1+3*n]
	case datatype.CombinerDarray: // size, rank, ndims, gsizes, distribs, dargs, psizes, order
		n := is[2]
		d.ints, d.counts = append(is[:3:3], is[3+n:]...), is[3:3+n]
	default:
		d.counts = append(is, as...)
	}
	return d
}

// smallOnly fails the int decoding call fn for a type of a large-count
// constructor, as MPICH does: its counts need the _c form.
func smallOnly(fn string, d decoded) error {
	if d.large {
		return newErr(mpi.ErrType, fn, "the type was made by a large-count constructor: its contents need %s_c", fn)
	}
	return nil
}

func xType_get_envelope(t *datatype.Type, nints, naddrs, ntypes, combiner *C.int) error {
	d := decode(t)
	if err := smallOnly("MPI_Type_get_envelope", d); err != nil {
		return err
	}
	*nints, *naddrs, *ntypes, *combiner = C.int(len(d.ints)), C.int(len(d.addrs)), C.int(len(d.types)), d.combiner
	return nil
}

func xType_get_envelope_c(t *datatype.Type, nints, naddrs, ncounts, ntypes *C.long, combiner *C.int) error {
	d := decode(t)
	*nints, *naddrs, *ncounts, *ntypes, *combiner = C.long(len(d.ints)), C.long(len(d.addrs)), C.long(len(d.counts)), C.long(len(d.types)), d.combiner
	return nil
}

func xType_get_contents(t *datatype.Type, maxints, maxaddrs, maxtypes int, ints_ *C.int, addrs *C.long, types_ *C.int) error {
	const fn = "MPI_Type_get_contents"
	d, err := contents(fn, t, maxints, maxaddrs, 0, maxtypes)
	if err != nil {
		return err
	}
	putContents(d, ints_, addrs, nil, types_)
	return nil
}

func xType_get_contents_c(t *datatype.Type, maxints, maxaddrs, maxcounts, maxtypes int, ints_ *C.int, addrs, counts *C.long, types_ *C.int) error {
	d, err := contents("MPI_Type_get_contents_c", t, maxints, maxaddrs, maxcounts, maxtypes)
	if err != nil {
		return err
	}
	putContents(d, ints_, addrs, counts, types_)
	return nil
}

// contents decodes t for fn, which may store up to the given numbers of
// each kind of argument (the int form fn, MPI_Type_get_contents, none of
// the large counts).
func contents(fn string, t *datatype.Type, maxints, maxaddrs, maxcounts, maxtypes int) (decoded, error) {
	if _, _, _, err := t.GetContents(); err != nil {
		return decoded{}, newErr(mpi.ErrType, fn, "%v", err)
	}
	d := decode(t)
	if fn == "MPI_Type_get_contents" {
		if err := smallOnly(fn, d); err != nil {
			return d, err
		}
	}
	if len(d.ints) > maxints || len(d.addrs) > maxaddrs || len(d.counts) > maxcounts || len(d.types) > maxtypes {
		return d, newErr(mpi.ErrArg, fn, "the arrays hold %d, %d, %d, %d; the type has %d ints, %d addresses, %d large counts, %d types",
			maxints, maxaddrs, maxcounts, maxtypes, len(d.ints), len(d.addrs), len(d.counts), len(d.types))
	}
	return d, nil
}

// putContents stores a decoded type's arguments in the C arrays.
func putContents(d decoded, ints_ *C.int, addrs, counts *C.long, types_ *C.int) {
	putInts(ints_, d.ints)
	putLongs(addrs, d.addrs)
	putLongs(counts, d.counts)
	if len(d.types) > 0 {
		out := unsafe.Slice(types_, len(d.types))
		for i, x := range d.types {
			out[i] = C.int(typeHandle(x))
		}
	}
}

// putLongs stores vs in the C array dst of MPI_Aints or MPI_Counts.
func putLongs(dst *C.long, vs []int) {
	if len(vs) == 0 {
		return
	}
	out := unsafe.Slice(dst, len(vs))
	for i, v := range vs {
		out[i] = C.long(v)
	}
}
