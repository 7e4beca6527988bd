// Command api is the conformance program for the parts of the MPI API that
// programs expect beyond plain messages and collectives: reductions over
// derived and padded struct datatypes (user and predefined operations),
// matched probes, Isendrecv, Request.Free and GetStatus, thread levels,
// Info objects, predefined attributes and TypedSlice. Each check compares
// every rank's results with a sequential computation of the same inputs.
//
//	mpirun -np 4 api <check>
//	api -list
package main

import (
	"github.com/adimpi/adimpi/conformance/internal/runner"
)

var checks = []runner.NamedFunc{
	{Name: "userop-struct", Fn: checkUserOpStruct},
	{Name: "userop-noncommute", Fn: checkUserOpNonCommute},
	{Name: "predef-derived", Fn: checkPredefDerived},
	{Name: "userop-large", Fn: checkUserOpLarge},
	{Name: "mprobe-threads", Fn: checkMprobeThreads},
	{Name: "mprobe-held", Fn: checkMprobeHeld},
	{Name: "isendrecv", Fn: checkIsendrecv},
	{Name: "request-handles", Fn: checkRequestHandles},
	{Name: "env", Fn: checkEnv},
	{Name: "typed-structs", Fn: checkTypedStructs},
}

// checks2 need two ranks (UNSUPPORTED with one).
var checks2 = []runner.NamedFunc{
	{Name: "intercomm-struct", Fn: checkIntercommStruct},
}

func main() {
	cs := append(runner.CommChecks(1, checks), runner.CommChecks(2, checks2)...)
	runner.Program{Name: "api", Checks: cs}.Main()
}
