// Package devices links every device into a program: importing it (package
// mpi does, blank) runs each device's registration with package adi. The
// MPI core itself never names a device; it looks one up in adi's registry.
package devices

import (
	// Each device registers itself with adi in its init function.
	_ "github.com/adimpi/adimpi/devices/bip"
	_ "github.com/adimpi/adimpi/devices/fm"
	_ "github.com/adimpi/adimpi/devices/netvm"
	_ "github.com/adimpi/adimpi/devices/via"
)
