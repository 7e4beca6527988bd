//go:build cgo

package main

/*
#include <stdint.h>
#include <unistd.h>
*/
import "C"

import (
	"os"
	"unsafe"

	"github.com/adimpi/adimpi/mpi"
)

// Dynamic processes: spawning, ports, the name service and MPI_Comm_join.
// The arguments that matter at the root only (command, argv, maxprocs, the
// port name of accept and connect) are read at the root only: the other
// ranks may pass anything.

const maxPortName = 256 // MPI_MAX_PORT_NAME

// cStrings reads a NULL-terminated C array of strings (nil for NULL).
func cStrings(p unsafe.Pointer) []string {
	if p == nil {
		return nil
	}
	var out []string
	for a := (**C.char)(p); *a != nil; a = (**C.char)(unsafe.Add(unsafe.Pointer(a), unsafe.Sizeof(a))) {
		out = append(out, C.GoString(*a))
	}
	return out
}

// putErrcodes stores one code per child into the C array at p (unless it
// is MPI_ERRCODES_IGNORE, NULL).
func putErrcodes(p *C.int, errs []error) {
	if p == nil || len(errs) == 0 {
		return
	}
	out := unsafe.Slice(p, len(errs))
	for i, e := range errs {
		out[i] = 0
		if e != nil {
			out[i] = C.int(codeOf(e))
		}
	}
}

func xComm_spawn(command *C.char, argv unsafe.Pointer, maxprocs int, info int32, root int, c *mpi.Comm, inter *C.int, errcodes *C.int) error {
	const fn = "MPI_Comm_spawn"
	var cmd string
	var args []string
	var in *mpi.Info
	if c.Rank() == root {
		if command == nil {
			return newErr(mpi.ErrArg, fn, "command is NULL")
		}
		cmd, args = C.GoString(command), cStrings(argv)
		var err error
		if in, err = infoOrNil(fn, info); err != nil {
			return err
		}
	}
	ic, errs, err := mpi.CommSpawn(cmd, args, maxprocs, in, root, c)
	putErrcodes(errcodes, errs)
	*inter = C.int(newComm(ic))
	return err
}

func xComm_spawn_multiple(count int, commands, argvs unsafe.Pointer, maxprocs *C.int, infoh *C.int, root int, c *mpi.Comm, inter *C.int, errcodes *C.int) error {
	const fn = "MPI_Comm_spawn_multiple"
	var cmds []mpi.SpawnCommand
	if c.Rank() == root {
		if count <= 0 || commands == nil || maxprocs == nil {
			return newErr(mpi.ErrArg, fn, "count %d, or NULL commands or maxprocs", count)
		}
		names := unsafe.Slice((**C.char)(commands), count)
		ns := unsafe.Slice(maxprocs, count)
		for i := range count {
			sc := mpi.SpawnCommand{Command: C.GoString(names[i]), MaxProcs: int(ns[i])}
			if argvs != nil {
				sc.Argv = cStrings(unsafe.Pointer(unsafe.Slice((**C.char)(argvs), count)[i]))
			}
			if infoh != nil {
				in, err := infoOrNil(fn, int32(unsafe.Slice(infoh, count)[i]))
				if err != nil {
					return err
				}
				sc.Info = in
			}
			cmds = append(cmds, sc)
		}
	}
	ic, errs, err := mpi.CommSpawnMultiple(cmds, root, c)
	putErrcodes(errcodes, errs)
	*inter = C.int(newComm(ic))
	return err
}

func xComm_get_parent(parent *C.int) error {
	*parent = C.int(commHandle(mpi.CommGetParent()))
	return nil
}

func xOpen_port(info int32, name *C.char) error {
	in, err := infoOrNil("MPI_Open_port", info)
	if err != nil {
		return err
	}
	p, err := mpi.OpenPort(in)
	if err != nil {
		return unraised(err)
	}
	putString(p, name, maxPortName, nil)
	return nil
}

func xClose_port(name *C.char) error { return unraised(mpi.ClosePort(C.GoString(name))) }

// acceptConnect is MPI_Comm_accept and MPI_Comm_connect.
func acceptConnect(fn string, f func(string, *mpi.Info, int, *mpi.Comm) (*mpi.Comm, error), port *C.char, info int32, root int, c *mpi.Comm, out *C.int) error {
	var name string
	var in *mpi.Info
	if c.Rank() == root {
		if port == nil {
			return newErr(mpi.ErrArg, fn, "port name is NULL")
		}
		name = C.GoString(port)
		var err error
		if in, err = infoOrNil(fn, info); err != nil {
			return err
		}
	}
	n, err := f(name, in, root, c)
	if err != nil {
		return err
	}
	*out = C.int(newComm(n))
	return nil
}

func xComm_accept(port *C.char, info int32, root int, c *mpi.Comm, out *C.int) error {
	return acceptConnect("MPI_Comm_accept", mpi.CommAccept, port, info, root, c, out)
}

func xComm_connect(port *C.char, info int32, root int, c *mpi.Comm, out *C.int) error {
	return acceptConnect("MPI_Comm_connect", mpi.CommConnect, port, info, root, c, out)
}

func xComm_disconnect(h *C.int) error {
	c, err := commOf("MPI_Comm_disconnect", int32(*h))
	if err != nil {
		return err
	}
	if err := mpi.CommDisconnect(c); err != nil {
		return err
	}
	dropHints(c)
	comms.del(int32(*h))
	*h = C.int(hCommNull)
	return nil
}

func xPublish_name(service *C.char, info int32, port *C.char) error {
	in, err := infoOrNil("MPI_Publish_name", info)
	if err != nil {
		return err
	}
	return unraised(mpi.PublishName(C.GoString(service), in, C.GoString(port)))
}

func xUnpublish_name(service *C.char, info int32, port *C.char) error {
	in, err := infoOrNil("MPI_Unpublish_name", info)
	if err != nil {
		return err
	}
	return unraised(mpi.UnpublishName(C.GoString(service), in, C.GoString(port)))
}

func xLookup_name(service *C.char, info int32, port *C.char) error {
	in, err := infoOrNil("MPI_Lookup_name", info)
	if err != nil {
		return err
	}
	p, err := mpi.LookupName(C.GoString(service), in)
	if err != nil {
		return unraised(err)
	}
	putString(p, port, maxPortName, nil)
	return nil
}

// xComm_join talks over a duplicate of the program's socket, which stays
// the program's.
func xComm_join(fd int, out *C.int) error {
	d := C.dup(C.int(fd))
	if d < 0 {
		return newErr(mpi.ErrArg, "MPI_Comm_join", "fd %d is not an open descriptor", fd)
	}
	f := os.NewFile(uintptr(d), "MPI_Comm_join socket")
	defer f.Close()
	c, err := mpi.CommJoin(f)
	if err != nil {
		return unraised(err)
	}
	*out = C.int(newComm(c))
	return nil
}
