package mpi

import (
	"fmt"
	goruntime "runtime"
	"runtime/debug"
	"strings"

	"github.com/adimpi/adimpi/adi"
)

// The version of the MPI standard whose calling conventions adimpi follows
// (MPI_VERSION, MPI_SUBVERSION): the calls it has behave as MPI 4.0 says
// (persistent collectives and Isendrecv are 4.0's); one-sided
// communication, MPI-IO and dynamic processes are not there.
const (
	Version    = 4
	Subversion = 0
)

// GetVersion returns the MPI standard version, Version and Subversion
// (MPI_Get_version). Like MPI's, it may be called before Init.
func GetVersion() (version, subversion int) { return Version, Subversion }

// GetLibraryVersion describes this library (MPI_Get_library_version):
// adimpi's module version, the Go release it was built with and the
// devices linked in, e.g. "adimpi v0.1.0 (go1.26.0; devices bip, fm, netvm,
// via)". It may be called before Init.
func GetLibraryVersion() string {
	return fmt.Sprintf("adimpi %s (%s; devices %s)", moduleVersion(), goruntime.Version(), strings.Join(adi.Devices(), ", "))
}

// moduleVersion is the version of the adimpi module this binary was built
// from, as the go command recorded it: "(devel)" when adimpi is the main
// module, unknown when the binary carries no build information.
func moduleVersion() string {
	const path = "github.com/adimpi/adimpi"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown version)"
	}
	if bi.Main.Path == path {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil {
				return d.Version + " (replaced by " + d.Replace.Path + ")"
			}
			return d.Version
		}
	}
	return "(unknown version)"
}

// Pcontrol sets the profiling level (MPI_Pcontrol). adimpi has no profiling
// layer that listens, so it does nothing, for any level; programs may call
// it as they would under another MPI.
func Pcontrol(level int) error { return nil }
