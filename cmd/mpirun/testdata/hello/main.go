// Command hello is a one-file test program for mpirun's .go and directory
// arguments: every rank prints a greeting and finalizes.
package main

import (
	"fmt"
	"os"

	"github.com/adimpi/adimpi/internal/pmi"
)

func main() {
	c, err := pmi.Connect()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		os.Exit(1)
	}
	if err := c.Barrier(); err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		os.Exit(1)
	}
	fmt.Printf("hello from rank %d of %d, args %q\n", c.Rank(), c.Size(), os.Args[1:])
	if err := c.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		os.Exit(1)
	}
}
