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

// attrs is an object's attribute cache (a communicator's, a window's):
// the value cached under each key.
type attrs[K comparable] struct {
	mu sync.Mutex
	m  map[K]any
}

// swap caches v under k and returns the value it replaces, if any.
func (a *attrs[K]) swap(k K, v any) (any, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	old, had := a.m[k]
	if a.m == nil {
		a.m = map[K]any{}
	}
	a.m[k] = v
	return old, had
}

// get is the value cached under k.
func (a *attrs[K]) get(k K) (any, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.m[k]
	return v, ok
}

// take removes and returns the value cached under k.
func (a *attrs[K]) take(k K) (any, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.m[k]
	delete(a.m, k)
	return v, ok
}

// attrKey is what the attribute calls need of a key for objects of type O
// (*Keyval for communicators, *WinKeyval for windows).
type attrKey[O any] interface {
	comparable
	// deleter is the key's Delete callback (nil: nothing to do).
	deleter() func(O, any) error
	// builtin is the MPI name of a predefined key, "" for the program's.
	builtin() string
}

func (k *Keyval) deleter() func(*Comm, any) error { return k.Delete }
func (k *Keyval) builtin() string                 { return k.predefined }

// setAttr is SetAttr on object o, whose cache is a: it caches v under k and
// runs k's Delete callback on the value replaced.
func setAttr[O any, K attrKey[O]](op string, a *attrs[K], o O, k K, v any) error {
	var none K
	if k == none {
		return errorf(ErrArg, op, "keyval is nil")
	}
	if name := k.builtin(); name != "" {
		return errorf(ErrArg, op, "%s is a predefined attribute and cannot be set", name)
	}
	if old, had := a.swap(k, v); had {
		return runDelete(op, k, o, old)
	}
	return nil
}

// deleteAttr is DeleteAttr on object o: it removes the value cached under
// k and runs k's Delete callback on it.
func deleteAttr[O any, K attrKey[O]](op string, a *attrs[K], o O, k K) error {
	var none K
	if k != none && k.builtin() != "" {
		return errorf(ErrArg, op, "%s is a predefined attribute and cannot be deleted", k.builtin())
	}
	v, had := a.take(k)
	if !had {
		return errorf(ErrArg, op, "no attribute is cached under this keyval")
	}
	return runDelete(op, k, o, v)
}

// runDelete runs k's Delete callback for value v removed from o.
func runDelete[O any, K attrKey[O]](op string, k K, o O, v any) error {
	if del := k.deleter(); del != nil {
		if err := del(o, v); err != nil {
			return errorf(ErrOther, op, "delete callback: %v", err)
		}
	}
	return nil
}

// dropAttrs deletes every attribute of o, whose cache is a (as o is
// freed), running every Delete callback, and returns the first error one
// returned.
func dropAttrs[O any, K attrKey[O]](a *attrs[K], o O) error {
	a.mu.Lock()
	m := a.m
	a.m = nil
	a.mu.Unlock()
	var first error
	for k, v := range m {
		if del := k.deleter(); del != nil {
			if err := del(o, v); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// SetAttr caches value on c under key k (MPI_Comm_set_attr), deleting any
// value cached there before.
func (c *Comm) SetAttr(k *Keyval, value any) error {
	const op = "MPI_Comm_set_attr"
	if err := checkComm(op, c); err != nil {
		return err
	}
	return setAttr(op, &c.attrs, c, k, value)
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
	return c.attrs.get(k)
}

// DeleteAttr removes the value cached on c under k, calling k's Delete
// callback (MPI_Comm_delete_attr).
func (c *Comm) DeleteAttr(k *Keyval) error {
	const op = "MPI_Comm_delete_attr"
	if err := checkComm(op, c); err != nil {
		return err
	}
	return deleteAttr(op, &c.attrs, c, k)
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
			n.attrs.swap(k, nv)
		}
	}
}

// dropAttrs deletes every attribute of c (on Free), returning the first
// callback error.
func (c *Comm) dropAttrs() error { return dropAttrs(&c.attrs, c) }
