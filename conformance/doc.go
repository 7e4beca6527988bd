// Package conformance runs adimpi's MPI conformance programs through the real
// launcher. Its test (go test ./conformance) builds cmd/mpirun and the
// point-to-point program conformance/p2p once, then runs every check of p2p
// under every registered device at several process counts, plus a subset
// with netvm's device options eager=0 and cma=off:
//
//	go test ./conformance                  # np = 1, 2, 4, 16
//	go test -short ./conformance           # np = 2, 4
//	go test -v -run 'netvm/np=4/' ./conformance
//
// Subtests are named device/np=N/check (device/option/np=N/check for the
// option runs). With -v, a table of every run's outcome and time is printed
// at the end.
package conformance
