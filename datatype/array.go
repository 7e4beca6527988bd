package datatype

import "reflect"

// Order is the storage order of a multidimensional array.
type Order int

// The array orders: OrderC is row-major (last index fastest), OrderFortran
// column-major (first index fastest).
const (
	OrderC Order = iota
	OrderFortran
)

// Distrib is how Darray distributes one dimension of an array over a
// dimension of the process grid.
type Distrib int

// The distributions of Darray.
const (
	DistributeNone   Distrib = iota // the dimension is not distributed (its psize must be 1)
	DistributeBlock                 // one block of darg (default ceil(gsize/psize)) indices per process
	DistributeCyclic                // blocks of darg (default 1) indices dealt round-robin
)

// DistributeDfltDarg asks Darray for a distribution's default argument.
const DistributeDfltDarg = -49767

// wrap gives a type built from others the identity of its constructor call.
func wrap(t *Type, comb Combiner, ints []int, types []*Type) *Type {
	w := &Type{comb: comb, ints: ints, types: types, inner: t,
		size: t.size, extent: t.extent, lb: t.lb, ub: t.ub, trueLB: t.trueLB, trueUB: t.trueUB,
		align: t.align, sticky: t.sticky}
	w.name = typeName(comb, ints, types)
	return w
}

// dimOrder returns the array dimensions from the fastest-varying to the slowest.
func dimOrder(n int, order Order) []int {
	d := make([]int, n)
	for k := range d {
		if order == OrderC {
			d[k] = n - 1 - k
		} else {
			d[k] = k
		}
	}
	return d
}

// Subarray makes the type of an n-dimensional subarray, subsizes[i] long
// from starts[i] on in dimension i, of a sizes[0]×...×sizes[n-1] array of
// old stored in the given order (MPI_Type_create_subarray). Its lower bound
// is 0 and its extent that of the whole array.
func Subarray(sizes, subsizes, starts []int, order Order, old *Type) (*Type, error) {
	const op = "MPI_Type_create_subarray"
	if err := checkOld(op, old); err != nil {
		return nil, err
	}
	n := len(sizes)
	if n == 0 || len(subsizes) != n || len(starts) != n {
		return nil, errorf(ErrArg, op, "%d sizes, %d subsizes and %d starts: need the same number, at least 1", n, len(subsizes), len(starts))
	}
	if order != OrderC && order != OrderFortran {
		return nil, errorf(ErrArg, op, "order %d is neither OrderC nor OrderFortran", order)
	}
	var c calc
	total := old.extent
	for i := range n {
		if sizes[i] < 1 || subsizes[i] < 1 || subsizes[i] > sizes[i] || starts[i] < 0 || starts[i] > sizes[i]-subsizes[i] {
			return nil, errorf(ErrArg, op, "dimension %d: size %d, subsize %d, start %d: need 1 <= subsize <= size and 0 <= start <= size-subsize", i, sizes[i], subsizes[i], starts[i])
		}
		total = c.mul(total, sizes[i])
	}
	if c.bad {
		return nil, errorf(ErrCount, op, "the array's extent overflows")
	}
	stride, disp := old.extent, 0
	t := old
	var err error
	for k, i := range dimOrder(n, order) {
		if k == 0 {
			t, err = Contiguous(subsizes[i], old)
		} else {
			t, err = Hvector(subsizes[i], 1, stride, t)
		}
		if err != nil {
			return nil, err
		}
		disp += starts[i] * stride
		stride *= sizes[i]
	}
	if t, err = Hindexed([]int{1}, []int{disp}, t); err != nil {
		return nil, err
	}
	if t, err = Resized(t, 0, stride); err != nil {
		return nil, err
	}
	ints := append(append(append(append([]int{n}, sizes...), subsizes...), starts...), int(order))
	return wrap(t, CombinerSubarray, ints, []*Type{old}), nil
}

// darrayDim returns the local index blocks of one dimension: nfull blocks
// of blen indices, step indices apart from first on, then one block of
// partial indices at last (if partial > 0).
func darrayDim(g int, d Distrib, darg, p, coord int) (first, nfull, blen, step, last, partial int) {
	switch d {
	case DistributeNone:
		return 0, 1, g, 0, 0, 0
	case DistributeBlock:
		if darg == DistributeDfltDarg {
			darg = (g + p - 1) / p
		}
		start := coord * darg
		cnt := max(0, min(darg, g-start))
		if cnt == 0 {
			return 0, 0, 0, 0, 0, 0
		}
		return start, 1, cnt, 0, 0, 0
	}
	if darg == DistributeDfltDarg {
		darg = 1
	}
	darg = min(darg, g)
	nblocks := (g + darg - 1) / darg
	mine := 0
	if nblocks > coord {
		mine = (nblocks - coord + p - 1) / p
	}
	if mine == 0 {
		return 0, 0, 0, 0, 0, 0
	}
	lastBlock := coord + (mine-1)*p
	if lastBlock == nblocks-1 && g%darg != 0 {
		return coord * darg, mine - 1, darg, p * darg, lastBlock * darg, g % darg
	}
	return coord * darg, mine, darg, p * darg, 0, 0
}

// Darray makes the type of the part of a distributed gsizes[0]×...×gsizes[n-1]
// array of old, stored in the given order, that process rank of size owns
// (MPI_Type_create_darray). The processes form a row-major psizes grid;
// dimension i is distributed over grid dimension i as distribs[i] says, with
// argument dargs[i] (or DistributeDfltDarg). Its lower bound is 0 and its
// extent that of the whole array.
func Darray(size, rank int, gsizes []int, distribs []Distrib, dargs []int, psizes []int, order Order, old *Type) (*Type, error) {
	const op = "MPI_Type_create_darray"
	if err := checkOld(op, old); err != nil {
		return nil, err
	}
	if size < 1 || rank < 0 || rank >= size {
		return nil, errorf(ErrArg, op, "rank %d is outside [0, %d)", rank, size)
	}
	n := len(gsizes)
	if n == 0 || len(distribs) != n || len(dargs) != n || len(psizes) != n {
		return nil, errorf(ErrArg, op, "%d gsizes, %d distribs, %d dargs and %d psizes: need the same number, at least 1", n, len(distribs), len(dargs), len(psizes))
	}
	if order != OrderC && order != OrderFortran {
		return nil, errorf(ErrArg, op, "order %d is neither OrderC nor OrderFortran", order)
	}
	var c calc
	total, procs := old.extent, 1
	for i := range n {
		g, p, d, a := gsizes[i], psizes[i], distribs[i], dargs[i]
		if g < 1 || p < 1 || g > limit || p > limit || a > limit {
			return nil, errorf(ErrArg, op, "dimension %d: gsize %d and psize %d must be in [1, 2^60], darg %d at most 2^60", i, g, p, a)
		}
		if d < DistributeNone || d > DistributeCyclic {
			return nil, errorf(ErrArg, op, "dimension %d: unknown distribution %d", i, d)
		}
		if a != DistributeDfltDarg && a < 1 {
			return nil, errorf(ErrArg, op, "dimension %d: darg %d must be positive or DistributeDfltDarg", i, a)
		}
		if d == DistributeNone && p != 1 {
			return nil, errorf(ErrArg, op, "dimension %d is not distributed but psize is %d", i, p)
		}
		if d == DistributeBlock && a != DistributeDfltDarg && c.mul(a, p) < g {
			return nil, errorf(ErrArg, op, "dimension %d: %d blocks of %d cannot hold %d indices", i, p, a, g)
		}
		total = c.mul(total, g)
		procs = c.mul(procs, p)
	}
	if c.bad {
		return nil, errorf(ErrCount, op, "the array's extent overflows")
	}
	if procs != size {
		return nil, errorf(ErrArg, op, "the process grid has %d processes, not %d", procs, size)
	}
	coords := make([]int, n)
	for i, r := n-1, rank; i >= 0; i-- {
		coords[i] = r % psizes[i]
		r /= psizes[i]
	}
	stride := old.extent
	t := old
	for _, i := range dimOrder(n, order) {
		first, nfull, blen, step, last, partial := darrayDim(gsizes[i], distribs[i], dargs[i], psizes[i], coords[i])
		var c calc
		a, err := Hvector(nfull, blen, c.mul(step, stride), t)
		if c.bad {
			return nil, errorf(ErrCount, op, "dimension %d: the stride of the distribution overflows", i)
		}
		if err != nil {
			return nil, err
		}
		if t, err = Struct([]int{1, partial}, []int{first * stride, last * stride}, []*Type{a, t}); err != nil {
			return nil, err
		}
		stride *= gsizes[i]
		if t, err = Resized(t, 0, stride); err != nil {
			return nil, err
		}
	}
	ints := []int{size, rank, n}
	ints = append(ints, gsizes...)
	for _, d := range distribs {
		ints = append(ints, int(d))
	}
	ints = append(append(append(ints, dargs...), psizes...), int(order))
	return wrap(t, CombinerDarray, ints, []*Type{old}), nil
}

// FromStruct returns a committed Struct type matching the memory layout of
// the Go struct type of v (or of *v): one block per field at the field's
// offset, with extent unsafe.Sizeof. Fields may be numeric or bool, arrays
// of them, or nested structs and arrays of structs; a pointer, string,
// slice, map, channel, function or interface field gives an ErrType error.
func FromStruct(v any) (*Type, error) {
	rt := reflect.TypeOf(v)
	if rt != nil && rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	if rt == nil || rt.Kind() != reflect.Struct {
		return nil, errorf(ErrType, "FromStruct", "%v is not a struct type", rt)
	}
	t, err := goType(rt, rt.String())
	if err != nil {
		return nil, err
	}
	t.name = rt.String()
	return t, t.Commit()
}

func goType(rt reflect.Type, path string) (*Type, error) {
	if t := ofKind(rt.Kind()); t != nil {
		return t, nil
	}
	switch rt.Kind() {
	case reflect.Bool:
		return Uint8, nil
	case reflect.Array:
		et, err := goType(rt.Elem(), path+"[]")
		if err != nil {
			return nil, err
		}
		return Contiguous(rt.Len(), et)
	case reflect.Struct:
		var blens, displs []int
		var types []*Type
		for i := range rt.NumField() {
			f := rt.Field(i)
			ft, err := goType(f.Type, path+"."+f.Name)
			if err != nil {
				return nil, err
			}
			if f.Type.Size() == 0 {
				continue
			}
			blens = append(blens, 1)
			displs = append(displs, int(f.Offset))
			types = append(types, ft)
		}
		s, err := Struct(blens, displs, types)
		if err != nil {
			return nil, err
		}
		if s.lb != 0 || s.extent != int(rt.Size()) {
			return Resized(s, 0, int(rt.Size()))
		}
		return s, nil
	}
	return nil, errorf(ErrType, "FromStruct", "%s has Go type %v, which has no MPI datatype", path, rt)
}

// ofKind is the predefined type of a numeric reflect.Kind, or nil.
func ofKind(k reflect.Kind) *Type {
	switch k {
	case reflect.Int:
		return Int
	case reflect.Int8:
		return Int8
	case reflect.Int16:
		return Int16
	case reflect.Int32:
		return Int32
	case reflect.Int64:
		return Int64
	case reflect.Uint:
		return Uint
	case reflect.Uint8:
		return Uint8
	case reflect.Uint16:
		return Uint16
	case reflect.Uint32:
		return Uint32
	case reflect.Uint64:
		return Uint64
	case reflect.Uintptr:
		return Uintptr
	case reflect.Float32:
		return Float32
	case reflect.Float64:
		return Float64
	case reflect.Complex64:
		return Complex64
	case reflect.Complex128:
		return Complex128
	}
	return nil
}
