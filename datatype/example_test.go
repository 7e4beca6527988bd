package datatype_test

import (
	"fmt"

	"github.com/adimpi/adimpi/datatype"
)

// A column of a 4×3 row-major matrix of float64, packed.
func ExampleVector() {
	col, err := datatype.Vector(4, 1, 3, datatype.Float64)
	if err != nil {
		panic(err)
	}
	if err := col.Commit(); err != nil {
		panic(err)
	}
	mem := make([]byte, col.Span(1))
	_ = col.Blocks(mem, 1, 0, col.Size(), func(p []byte) error {
		fmt.Print(len(p), " ")
		return nil
	})
	fmt.Println("| size", col.Size(), "extent", col.Extent(), "span", col.Span(1))
	// Output: 8 8 8 8 | size 32 extent 80 span 80
}

// Gathering a type's data piece by piece, at most 12 bytes at a time.
func ExampleSegment() {
	v, _ := datatype.Vector(2, 2, 4, datatype.Int32)
	_ = v.Commit()
	mem := make([]byte, v.Span(1))
	s, _ := datatype.NewSegment(v, 1)
	for {
		p, ok := s.Next(mem, 12)
		if !ok {
			break
		}
		fmt.Print(len(p), " ")
	}
	fmt.Println()
	// Output: 8 8
}
