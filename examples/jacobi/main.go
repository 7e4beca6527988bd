// Jacobi solves Laplace's equation on a square grid with a 2-D domain
// decomposition: a Cartesian communicator (DimsCreate, CartCreate,
// CartShift) arranges the ranks, each rank keeps its block plus a one-cell
// halo, and every iteration exchanges halos with its four neighbours —
// rows as contiguous slices, columns as a strided vector datatype that the
// device moves block by block without packing. The global residual comes
// from Allreduce. The result is checked against the same iteration run
// serially on rank 0.
//
//	go run ./cmd/mpirun -np 4 ./examples/jacobi
//	go run ./cmd/mpirun -np 6 ./examples/jacobi -n 120 -iters 200
package main

import (
	"flag"
	"fmt"
	"log"
	"math"

	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

var (
	n     = flag.Int("n", 96, "interior grid points per side")
	iters = flag.Int("iters", 100, "Jacobi iterations")
)

// boundary is the fixed value on the grid's edge at global point (i, j).
func boundary(i, j, n int) float64 {
	if i == 0 {
		return 100 // the top edge is hot
	}
	return 0
}

func main() {
	flag.Parse()
	must(mpi.Init())
	world := mpi.World()
	dims := []int{0, 0}
	must(mpi.DimsCreate(world.Size(), dims))
	cart, err := world.CartCreate(dims, []bool{false, false}, false)
	must(err)
	coords, err := cart.CartCoords(cart.Rank())
	must(err)
	up, down, err := cart.CartShift(0, 1)
	must(err)
	left, right, err := cart.CartShift(1, 1)
	must(err)

	// This rank's block of the (n+2)×(n+2) global grid, interior rows
	// [r0, r0+rows) and columns [c0, c0+cols), 1-based like the global grid.
	rows, r0 := split(*n, dims[0], coords[0])
	cols, c0 := split(*n, dims[1], coords[1])
	w := cols + 2 // local row length, with the halo
	cur, next := make([]float64, (rows+2)*w), make([]float64, (rows+2)*w)
	for _, g := range [][]float64{cur, next} {
		for i := 0; i < rows+2; i++ {
			for j := 0; j < w; j++ {
				gi, gj := r0-1+i, c0-1+j
				if gi == 0 || gj == 0 || gi == *n+1 || gj == *n+1 {
					g[i*w+j] = boundary(gi, gj, *n)
				}
			}
		}
	}
	column, err := datatype.Vector(rows, 1, w, datatype.Float64)
	must(err)
	must(column.Commit())
	col := func(g []float64, j int) mpi.Buffer {
		return mpi.Typed(mpi.Slice(g[w+j:]).Mem, 1, column)
	}

	var resid float64
	for it := 0; it < *iters; it++ {
		// Halos: rows up/down, columns left/right.
		_, err = mpi.Sendrecv(cart, cur[w+1:w+1+cols], up, 0, cur[(rows+1)*w+1:(rows+1)*w+1+cols], down, 0)
		must(err)
		_, err = mpi.Sendrecv(cart, cur[rows*w+1:rows*w+1+cols], down, 1, cur[1:1+cols], up, 1)
		must(err)
		_, err = mpi.SendrecvBuf(cart, col(cur, 1), left, 2, col(cur, cols+1), right, 2)
		must(err)
		_, err = mpi.SendrecvBuf(cart, col(cur, cols), right, 3, col(cur, 0), left, 3)
		must(err)
		local := 0.0
		for i := 1; i <= rows; i++ {
			for j := 1; j <= cols; j++ {
				v := 0.25 * (cur[(i-1)*w+j] + cur[(i+1)*w+j] + cur[i*w+j-1] + cur[i*w+j+1])
				local += (v - cur[i*w+j]) * (v - cur[i*w+j])
				next[i*w+j] = v
			}
		}
		cur, next = next, cur
		sum := []float64{0}
		must(mpi.Allreduce(cart, []float64{local}, sum, mpi.Sum))
		resid = math.Sqrt(sum[0])
	}

	// Gather the interior to rank 0 and compare with a serial run.
	block := make([]float64, 0, rows*cols)
	for i := 1; i <= rows; i++ {
		block = append(block, cur[i*w+1:i*w+1+cols]...)
	}
	counts := make([]int, cart.Size())
	sizes := []int{rows * cols}
	must(mpi.Allgather(cart, sizes, counts))
	displs := make([]int, len(counts))
	total := 0
	for i, c := range counts {
		displs[i], total = total, total+c
	}
	all := make([]float64, total)
	must(mpi.Gatherv(cart, block, all, counts, displs, 0))
	if cart.Rank() == 0 {
		serial := solveSerial(*n, *iters)
		maxErr := 0.0
		for rk := 0; rk < cart.Size(); rk++ {
			cs, err := cart.CartCoords(rk)
			must(err)
			rr, rr0 := split(*n, dims[0], cs[0])
			cc, cc0 := split(*n, dims[1], cs[1])
			for i := 0; i < rr; i++ {
				for j := 0; j < cc; j++ {
					d := math.Abs(all[displs[rk]+i*cc+j] - serial[(rr0+i)*(*n+2)+cc0+j])
					maxErr = math.Max(maxErr, d)
				}
			}
		}
		fmt.Printf("jacobi: %dx%d grid on %dx%d ranks, %d iterations, residual %.6g, max difference from serial %.3g\n",
			*n, *n, dims[0], dims[1], *iters, resid, maxErr)
		if maxErr > 1e-9 {
			log.Fatalf("jacobi: parallel result differs from serial by %g", maxErr)
		}
	}
	must(cart.Free())
	must(mpi.Finalize())
}

// split gives part p of n points cut into parts pieces: its length and its
// first (1-based) global index.
func split(n, parts, p int) (length, first int) {
	base, extra := n/parts, n%parts
	length = base
	if p < extra {
		length++
	}
	return length, 1 + p*base + min(p, extra)
}

// solveSerial runs the same iteration on the whole grid.
func solveSerial(n, iters int) []float64 {
	w := n + 2
	cur, next := make([]float64, w*w), make([]float64, w*w)
	for _, g := range [][]float64{cur, next} {
		for i := 0; i < w; i++ {
			for j := 0; j < w; j++ {
				if i == 0 || j == 0 || i == w-1 || j == w-1 {
					g[i*w+j] = boundary(i, j, n)
				}
			}
		}
	}
	for it := 0; it < iters; it++ {
		for i := 1; i <= n; i++ {
			for j := 1; j <= n; j++ {
				next[i*w+j] = 0.25 * (cur[(i-1)*w+j] + cur[(i+1)*w+j] + cur[i*w+j-1] + cur[i*w+j+1])
			}
		}
		cur, next = next, cur
	}
	return cur
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
