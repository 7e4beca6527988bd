package mpi

import "slices"

// Comparison is the result of comparing two groups or two communicators.
type Comparison int

// The results of GroupCompare and Compare (MPI_IDENT, MPI_CONGRUENT,
// MPI_SIMILAR, MPI_UNEQUAL).
const (
	Ident     Comparison = iota // the same object (communicators) or the same members in the same order (groups)
	Congruent                   // communicators with the same members in the same order, different contexts
	Similar                     // the same members in a different order
	Unequal                     // different members
)

// String is the comparison's MPI name.
func (c Comparison) String() string {
	switch c {
	case Ident:
		return "MPI_IDENT"
	case Congruent:
		return "MPI_CONGRUENT"
	case Similar:
		return "MPI_SIMILAR"
	}
	return "MPI_UNEQUAL"
}

// Group is an ordered set of processes (MPI_Group). Groups are immutable
// values: the operations below return new groups. A process's rank in a
// group is its position in the order.
type Group struct {
	world []int       // group rank → world rank
	local map[int]int // world rank → group rank
}

// GroupEmpty is MPI_GROUP_EMPTY, the group with no members.
var GroupEmpty = newGroup(nil)

func newGroup(world []int) *Group {
	g := &Group{world: world, local: make(map[int]int, len(world))}
	for i, w := range world {
		g.local[w] = i
	}
	return g
}

func checkGroup(op string, g *Group) error {
	if g == nil {
		return errorf(ErrGroup, op, "group is nil (MPI_GROUP_NULL)")
	}
	return nil
}

// Group returns the communicator's group (MPI_Comm_group).
func (c *Comm) Group() (*Group, error) {
	if err := checkComm("MPI_Comm_group", c); err != nil {
		return nil, err
	}
	if c.inter {
		return newGroup(c.lworld), nil
	}
	return newGroup(c.world), nil
}

// Size is the number of processes in the group (0 for a nil Group).
func (g *Group) Size() int {
	if g == nil {
		return 0
	}
	return len(g.world)
}

// Rank is this process's rank in the group, or Undefined if it is not a
// member (or MPI is not running).
func (g *Group) Rank() int {
	if g == nil {
		return Undefined
	}
	stateMu.Lock()
	r := rt
	stateMu.Unlock()
	if r == nil {
		return Undefined
	}
	if i, ok := g.local[r.rank]; ok {
		return i
	}
	return Undefined
}

// Free releases the group (MPI_Group_free). Groups are garbage collected,
// so this only exists for symmetry; it never fails on a valid group.
func (g *Group) Free() error { return checkGroup("MPI_Group_free", g) }

// Incl makes the group of the listed ranks of g, in the order given
// (MPI_Group_incl). Ranks must be valid and distinct.
func (g *Group) Incl(ranks []int) (*Group, error) {
	const op = "MPI_Group_incl"
	if err := checkGroup(op, g); err != nil {
		return nil, err
	}
	seen := make(map[int]bool, len(ranks))
	w := make([]int, len(ranks))
	for i, r := range ranks {
		if r < 0 || r >= len(g.world) {
			return nil, errorf(ErrRank, op, "rank %d is out of range [0, %d)", r, len(g.world))
		}
		if seen[r] {
			return nil, errorf(ErrRank, op, "rank %d is listed twice", r)
		}
		seen[r] = true
		w[i] = g.world[r]
	}
	return newGroup(w), nil
}

// Excl makes the group of g's members except the listed ranks, in g's order
// (MPI_Group_excl). Ranks must be valid and distinct.
func (g *Group) Excl(ranks []int) (*Group, error) {
	const op = "MPI_Group_excl"
	if err := checkGroup(op, g); err != nil {
		return nil, err
	}
	drop := make(map[int]bool, len(ranks))
	for _, r := range ranks {
		if r < 0 || r >= len(g.world) {
			return nil, errorf(ErrRank, op, "rank %d is out of range [0, %d)", r, len(g.world))
		}
		if drop[r] {
			return nil, errorf(ErrRank, op, "rank %d is listed twice", r)
		}
		drop[r] = true
	}
	var w []int
	for i, x := range g.world {
		if !drop[i] {
			w = append(w, x)
		}
	}
	return newGroup(w), nil
}

// expandRanges turns (first, last, stride) triples into a list of ranks.
func (g *Group) expandRanges(op string, ranges [][3]int) ([]int, error) {
	var out []int
	for _, rg := range ranges {
		first, last, stride := rg[0], rg[1], rg[2]
		if stride == 0 {
			return nil, errorf(ErrArg, op, "range %v has stride 0", rg)
		}
		if first < 0 || first >= len(g.world) || last < 0 || last >= len(g.world) {
			return nil, errorf(ErrRank, op, "range %v is out of range [0, %d)", rg, len(g.world))
		}
		if (stride > 0 && first > last) || (stride < 0 && first < last) {
			continue // an empty range
		}
		for r := first; (stride > 0 && r <= last) || (stride < 0 && r >= last); r += stride {
			out = append(out, r)
		}
	}
	return out, nil
}

// RangeIncl is Incl of the ranks given by (first, last, stride) triples
// (MPI_Group_range_incl); last is included when the stride reaches it.
func (g *Group) RangeIncl(ranges [][3]int) (*Group, error) {
	const op = "MPI_Group_range_incl"
	if err := checkGroup(op, g); err != nil {
		return nil, err
	}
	ranks, err := g.expandRanges(op, ranges)
	if err != nil {
		return nil, err
	}
	return g.Incl(ranks)
}

// RangeExcl is Excl of the ranks given by (first, last, stride) triples
// (MPI_Group_range_excl).
func (g *Group) RangeExcl(ranges [][3]int) (*Group, error) {
	const op = "MPI_Group_range_excl"
	if err := checkGroup(op, g); err != nil {
		return nil, err
	}
	ranks, err := g.expandRanges(op, ranges)
	if err != nil {
		return nil, err
	}
	return g.Excl(ranks)
}

// Union is the group of a's members followed by b's members not in a
// (MPI_Group_union).
func Union(a, b *Group) (*Group, error) {
	const op = "MPI_Group_union"
	if err := checkGroup(op, a); err != nil {
		return nil, err
	}
	if err := checkGroup(op, b); err != nil {
		return nil, err
	}
	w := slices.Clone(a.world)
	for _, x := range b.world {
		if _, ok := a.local[x]; !ok {
			w = append(w, x)
		}
	}
	return newGroup(w), nil
}

// Intersection is the group of a's members that are also in b, in a's order
// (MPI_Group_intersection).
func Intersection(a, b *Group) (*Group, error) {
	return filterGroup("MPI_Group_intersection", a, b, true)
}

// Difference is the group of a's members not in b, in a's order
// (MPI_Group_difference).
func Difference(a, b *Group) (*Group, error) {
	return filterGroup("MPI_Group_difference", a, b, false)
}

// filterGroup keeps, in a's order, the members of a that are (inB) or are
// not (!inB) members of b.
func filterGroup(op string, a, b *Group, inB bool) (*Group, error) {
	if err := checkGroup(op, a); err != nil {
		return nil, err
	}
	if err := checkGroup(op, b); err != nil {
		return nil, err
	}
	var w []int
	for _, x := range a.world {
		if _, ok := b.local[x]; ok == inB {
			w = append(w, x)
		}
	}
	return newGroup(w), nil
}

// TranslateRanks maps ranks of group a to the ranks of the same processes in
// group b (MPI_Group_translate_ranks): Undefined for a process not in b,
// ProcNull for ProcNull.
func TranslateRanks(a *Group, ranks []int, b *Group) ([]int, error) {
	const op = "MPI_Group_translate_ranks"
	if err := checkGroup(op, a); err != nil {
		return nil, err
	}
	if err := checkGroup(op, b); err != nil {
		return nil, err
	}
	out := make([]int, len(ranks))
	for i, r := range ranks {
		if r == ProcNull {
			out[i] = ProcNull
			continue
		}
		if r < 0 || r >= len(a.world) {
			return nil, errorf(ErrRank, op, "rank %d is out of range [0, %d)", r, len(a.world))
		}
		if j, ok := b.local[a.world[r]]; ok {
			out[i] = j
		} else {
			out[i] = Undefined
		}
	}
	return out, nil
}

// GroupCompare compares two groups (MPI_Group_compare): Ident for the same
// members in the same order, Similar for the same members in another order,
// Unequal otherwise.
func GroupCompare(a, b *Group) (Comparison, error) {
	const op = "MPI_Group_compare"
	if err := checkGroup(op, a); err != nil {
		return Unequal, err
	}
	if err := checkGroup(op, b); err != nil {
		return Unequal, err
	}
	return compareMembers(a.world, b.world), nil
}

func compareMembers(a, b []int) Comparison {
	if slices.Equal(a, b) {
		return Ident
	}
	if len(a) != len(b) {
		return Unequal
	}
	s, t := slices.Clone(a), slices.Clone(b)
	slices.Sort(s)
	slices.Sort(t)
	if slices.Equal(s, t) {
		return Similar
	}
	return Unequal
}
