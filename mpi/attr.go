package mpi

import (
	"os"
	"strconv"
	"sync"
)

// Keyval is an attribute key for caching values on communicators
// (MPI_Comm_create_keyval). Its callbacks decide what Dup does with a cached
// value and what happens when the value is dropped.
type Keyval struct {
	// Copy is called by Dup for each value cached under this key on the old
	// communicator: it returns the value for the new one and whether to
	// cache it there at all. Nil means "do not copy" (MPI_COMM_NULL_COPY_FN).
	Copy func(old *Comm, value any) (any, bool)
	// Delete is called when the value is removed: DeleteAttr, SetAttr
	// replacing it, or Free of the communicator. Nil means nothing to do.
	// An error it returns is returned by the call that removed the value.
	Delete func(c *Comm, value any) error

	predefined string // the MPI name of a predefined attribute key
}

// The predefined attribute keys (MPI_TAG_UB, ...). Their values, read with
// Attr on any communicator, are computed by the runtime; SetAttr and
// DeleteAttr refuse them.
var (
	// KeyTagUB's value is the largest valid tag, TagUB (an int).
	KeyTagUB = &Keyval{predefined: "MPI_TAG_UB"}
	// KeyWtimeIsGlobal's value (a bool) says whether Wtime agrees across
	// processes: false, each process counts from its own start.
	KeyWtimeIsGlobal = &Keyval{predefined: "MPI_WTIME_IS_GLOBAL"}
	// KeyHost's value is the rank of a host process: ProcNull, there is
	// none.
	KeyHost = &Keyval{predefined: "MPI_HOST"}
	// KeyIO's value is the rank of a process that can do I/O: AnySource,
	// every process can.
	KeyIO = &Keyval{predefined: "MPI_IO"}
	// KeyAppNum's value (an int) is the number of this process's program
	// in an MPMD launch (mpirun -n 1 ./a : -n 3 ./b: 0 for a, 1 for b),
	// from the ADIMPI_APPNUM that mpirun sets; the attribute is absent
	// when the launcher did not set it.
	KeyAppNum = &Keyval{predefined: "MPI_APPNUM"}
	// KeyUniverseSize's value (an int) is how many processes the job may
	// usefully have, counting those it may spawn: mpirun's -usize, else
	// the launcher's slots, else MPI_COMM_WORLD's size (spawn.go).
	KeyUniverseSize = &Keyval{predefined: "MPI_UNIVERSE_SIZE"}
)

// predefinedAttr is the value of a predefined attribute, if it has one.
func predefinedAttr(k *Keyval) (any, bool) {
	switch k {
	case KeyTagUB:
		return TagUB, true
	case KeyWtimeIsGlobal:
		return false, true
	case KeyHost:
		return ProcNull, true
	case KeyIO:
		return AnySource, true
	case KeyAppNum:
		v, err := strconv.Atoi(os.Getenv("ADIMPI_APPNUM"))
		if err != nil || v < 0 {
			return nil, false
		}
		return v, true
	case KeyUniverseSize:
		if r := live.Load(); r != nil {
			return r.universeSize(), true
		}
	}
	return nil, false
}

// attrs is a communicator's attribute cache.
type attrs struct {
	mu sync.Mutex
	m  map[*Keyval]any
}

// SetAttr caches value on c under key k (MPI_Comm_set_attr), deleting any
// value cached there before.
func (c *Comm) SetAttr(k *Keyval, value any) error {
	const op = "MPI_Comm_set_attr"
	if err := checkComm(op, c); err != nil {
		return err
	}
	if k == nil {
		return errorf(ErrArg, op, "keyval is nil")
	}
	if k.predefined != "" {
		return errorf(ErrArg, op, "%s is a predefined attribute and cannot be set", k.predefined)
	}
	c.attrs.mu.Lock()
	old, had := c.attrs.m[k]
	if c.attrs.m == nil {
		c.attrs.m = map[*Keyval]any{}
	}
	c.attrs.m[k] = value
	c.attrs.mu.Unlock()
	if had && k.Delete != nil {
		if err := k.Delete(c, old); err != nil {
			return errorf(ErrOther, op, "delete callback: %v", err)
		}
	}
	return nil
}

// Attr returns the value cached on c under k (MPI_Comm_get_attr), or for a
// predefined key (KeyTagUB, ...) its value, on any communicator.
func (c *Comm) Attr(k *Keyval) (any, bool) {
	if c == nil || k == nil {
		return nil, false
	}
	if k.predefined != "" {
		return predefinedAttr(k)
	}
	c.attrs.mu.Lock()
	defer c.attrs.mu.Unlock()
	v, ok := c.attrs.m[k]
	return v, ok
}

// DeleteAttr removes the value cached on c under k, calling k's Delete
// callback (MPI_Comm_delete_attr).
func (c *Comm) DeleteAttr(k *Keyval) error {
	const op = "MPI_Comm_delete_attr"
	if err := checkComm(op, c); err != nil {
		return err
	}
	if k != nil && k.predefined != "" {
		return errorf(ErrArg, op, "%s is a predefined attribute and cannot be deleted", k.predefined)
	}
	c.attrs.mu.Lock()
	v, had := c.attrs.m[k]
	delete(c.attrs.m, k)
	c.attrs.mu.Unlock()
	if !had {
		return errorf(ErrArg, op, "no attribute is cached under this keyval")
	}
	if k.Delete != nil {
		if err := k.Delete(c, v); err != nil {
			return errorf(ErrOther, op, "delete callback: %v", err)
		}
	}
	return nil
}

// copyAttrs runs the Copy callbacks of old's attributes for its duplicate n.
func (n *Comm) copyAttrs(old *Comm) {
	old.attrs.mu.Lock()
	defer old.attrs.mu.Unlock()
	for k, v := range old.attrs.m {
		if k.Copy == nil {
			continue
		}
		if nv, keep := k.Copy(old, v); keep {
			if n.attrs.m == nil {
				n.attrs.m = map[*Keyval]any{}
			}
			n.attrs.m[k] = nv
		}
	}
}

// dropAttrs deletes every attribute of c (on Free), returning the first
// callback error.
func (c *Comm) dropAttrs() error {
	c.attrs.mu.Lock()
	m := c.attrs.m
	c.attrs.m = nil
	c.attrs.mu.Unlock()
	var first error
	for k, v := range m {
		if k.Delete != nil {
			if err := k.Delete(c, v); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}
