// Package conformance runs adimpi's MPI conformance programs through the real
// launcher. Its test (go test ./conformance) builds cmd/mpirun and the
// programs once, then runs their checks under every registered device. Each
// program is one MPI program with named checks (run one with
// "mpirun -np N ./<program> <check>", list them with "<program> -list"):
//
//   - p2p: point-to-point semantics (ordering, wildcards, truncation, the send
//     modes, probe, cancel, persistent requests, the Wait/Test families,
//     error classes, a rank that dies early, hundreds of pending receives).
//   - datatypes: derived datatypes over point-to-point (matrix columns, 3-D
//     subarray halos, Go structs, partial receives, wildcard strided
//     receives, Get_elements).
//   - stress: what usually breaks MPIs: flood (300 outstanding Isend and
//     Irecv per peer with one envelope, three peers at once), thresholds
//     (every protocol threshold ±1 byte, blocking and non-blocking, and
//     bursts that wrap the eager ring), longrun (10⁵ messages, then no
//     request left in the device and a bounded heap) and progress-rule
//     (interleaved pending sends and receives with one envelope on two
//     ranks all complete, matched in order).
//   - collectives: groups, communicators (Dup/Split/Create/Free, thousands
//     alive, attributes), topologies and neighbour collectives, and every
//     intracommunicator collective blocking and non-blocking, with
//     predefined, user and non-commutative operations, InPlace, collectives
//     from several goroutines, and error classes; every result is compared
//     with a sequential computation of the same inputs.
//   - intercoll: every collective on intercommunicators with uneven groups,
//     Idup among concurrent collectives, persistent collectives started
//     many times, and their error classes.
//   - p2p-race: the p2p program built with Go's race detector.
//
// The runs:
//
//	TestP2P        every check at np = 1, 2, 3, 4, 8, 16; optionChecks at np=4
//	               with netvm's eager=0 and cma=off and with mpirun -async-progress
//	TestDatatypes  every check at np = 1, 2, 3, 4, 8, 16; all at np=4 with
//	               eager=0, cma=off and scatter=1024
//	TestStress     each check at its own counts (stressNPs), plain, with eager=0,
//	               cma=off and -async-progress; thresholds also with tiny rings
//	               (eager=1024 ring=4096, with and without cma=off)
//	TestCollectives every check at np = 1, 2, 3, 4, 8, 16, and at np=4 with
//	               -async-progress
//	TestInterColl  every check at np = 2, 3, 4, 8, and at np=4 with -async-progress
//	TestRace       optionChecks of p2p-race at np=4, with and without -async-progress
//
// With -short, p2p, datatypes, collectives and intercoll run at np = 2 and
// 4 only (the collective programs with smaller sizes), and stress runs
// fewer counts and no longrun.
//
// Subtests are named Test<Program>/device/np=N/check, or
// Test<Program>/device/option/.../np=N/check for runs with device options
// (the option "async" stands for mpirun -async-progress). So, for example:
//
//	go test ./conformance                                  # everything
//	go test -short ./conformance                           # the smaller set
//	go test -v -run 'TestP2P/netvm/np=4/' ./conformance     # p2p at np=4
//	go test -v -run '/netvm/eager=0/' ./conformance        # every eager=0 run
//	go test -v -run 'TestP2P/netvm/async/' ./conformance   # -async-progress runs
//	go test -v -run 'TestStress//np=16/flood' ./conformance
//	go test -v -run 'TestStress/netvm/eager=1024/ring=4096/' ./conformance
//
// A failing run prints the mpirun command that reproduces it at the module
// root. With -v (or on a failure) the test ends with one table per program,
// a row per check and a column per configuration giving each run's outcome
// (PASS, FAIL or UNSUPPORTED) and time, and a table per device counting
// each program's runs by outcome.
package conformance
