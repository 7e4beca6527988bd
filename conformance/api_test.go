package conformance

import "testing"

// apiProg is conformance/api: reductions over derived and padded struct
// datatypes, matched probes, Isendrecv, request handles, thread levels,
// Info, attributes and TypedSlice.
var apiProg = &program{name: "api"}

func init() { programs = append(programs, apiProg) }

// TestAPI runs every check of conformance/api through mpirun under every
// registered device at np = 2 and 3, and on netvm with the asynchronous
// progress goroutine at np = 3.
func TestAPI(t *testing.T) {
	eachDevice(t, func(t *testing.T, dev string) {
		matrix(t, apiProg, dev, nil, []int{2, 3}, apiProg.checks, nil)
		if dev == "netvm" {
			matrix(t, apiProg, dev, []string{asyncOpt}, []int{3}, apiProg.checks, nil)
		}
	})
}
