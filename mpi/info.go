package mpi

import (
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The longest info key and value (MPI_MAX_INFO_KEY, MPI_MAX_INFO_VAL).
const (
	InfoMaxKey = 255
	InfoMaxVal = 1024
)

// Info is an ordered set of (key, value) string pairs (MPI_Info), the hints
// MPI calls take. Keys keep the order in which they were first set. An Info
// is safe for concurrent use.
type Info struct {
	mu    sync.Mutex
	keys  []string
	vals  map[string]string
	freed bool
}

// NewInfo returns an empty Info (MPI_Info_create).
func NewInfo() *Info { return &Info{vals: map[string]string{}} }

// use checks the Info for a call and locks it; the caller unlocks.
func (i *Info) use(op string) error {
	if i == nil {
		return errorf(ErrArg, op, "info is nil (MPI_INFO_NULL)")
	}
	i.mu.Lock()
	if i.freed {
		i.mu.Unlock()
		return errorf(ErrArg, op, "info has been freed")
	}
	return nil
}

func checkInfoKey(op, key string) error {
	if key == "" || len(key) > InfoMaxKey {
		return errorf(ErrArg, op, "info key %q is empty or longer than %d bytes", key, InfoMaxKey)
	}
	return nil
}

// Set sets key to value, replacing any value it had (MPI_Info_set). An
// empty key, or one over InfoMaxKey bytes, or a value over InfoMaxVal
// bytes, is an ErrArg error.
func (i *Info) Set(key, value string) error {
	const op = "MPI_Info_set"
	if err := checkInfoKey(op, key); err != nil {
		return err
	}
	if len(value) > InfoMaxVal {
		return errorf(ErrArg, op, "value of info key %q is %d bytes, longer than %d", key, len(value), InfoMaxVal)
	}
	if err := i.use(op); err != nil {
		return err
	}
	defer i.mu.Unlock()
	if _, ok := i.vals[key]; !ok {
		i.keys = append(i.keys, key)
	}
	i.vals[key] = value
	return nil
}

// Get returns key's value and whether key is set (MPI_Info_get_string).
func (i *Info) Get(key string) (string, bool, error) {
	const op = "MPI_Info_get_string"
	if err := checkInfoKey(op, key); err != nil {
		return "", false, err
	}
	if err := i.use(op); err != nil {
		return "", false, err
	}
	defer i.mu.Unlock()
	v, ok := i.vals[key]
	return v, ok, nil
}

// Delete removes key (MPI_Info_delete); a key that is not set is an ErrArg
// error (MPI_ERR_INFO_NOKEY).
func (i *Info) Delete(key string) error {
	const op = "MPI_Info_delete"
	if err := checkInfoKey(op, key); err != nil {
		return err
	}
	if err := i.use(op); err != nil {
		return err
	}
	defer i.mu.Unlock()
	if _, ok := i.vals[key]; !ok {
		return errorf(ErrArg, op, "info key %q is not set", key)
	}
	delete(i.vals, key)
	i.keys = slices.DeleteFunc(i.keys, func(k string) bool { return k == key })
	return nil
}

// Dup returns a copy with the same pairs in the same order (MPI_Info_dup).
func (i *Info) Dup() (*Info, error) {
	if err := i.use("MPI_Info_dup"); err != nil {
		return nil, err
	}
	defer i.mu.Unlock()
	n := &Info{keys: slices.Clone(i.keys), vals: make(map[string]string, len(i.vals))}
	for k, v := range i.vals {
		n.vals[k] = v
	}
	return n, nil
}

// NKeys is the number of keys set (MPI_Info_get_nkeys).
func (i *Info) NKeys() (int, error) {
	if err := i.use("MPI_Info_get_nkeys"); err != nil {
		return 0, err
	}
	defer i.mu.Unlock()
	return len(i.keys), nil
}

// NthKey returns the n-th key, counting from 0 in the order the keys were
// first set (MPI_Info_get_nthkey); n outside [0, NKeys) is an ErrArg error.
func (i *Info) NthKey(n int) (string, error) {
	const op = "MPI_Info_get_nthkey"
	if err := i.use(op); err != nil {
		return "", err
	}
	defer i.mu.Unlock()
	if n < 0 || n >= len(i.keys) {
		return "", errorf(ErrArg, op, "key number %d is outside [0, %d)", n, len(i.keys))
	}
	return i.keys[n], nil
}

// Free releases the Info (MPI_Info_free); using it afterwards is an ErrArg
// error.
func (i *Info) Free() error {
	if err := i.use("MPI_Info_free"); err != nil {
		return err
	}
	defer i.mu.Unlock()
	i.freed, i.keys, i.vals = true, nil, nil
	return nil
}

// InfoEnv returns a new Info describing how this process was started
// (MPI_INFO_ENV): command and argv (the program and its arguments, argv
// space-separated), maxprocs (the number of processes in MPI_COMM_WORLD,
// once MPI runs), host, arch (GOOS/GOARCH), wdir (the working directory)
// and thread_level. Keys whose value is unknown are left out. Each call
// returns a fresh Info the program may change or free.
func InfoEnv() *Info {
	i := NewInfo()
	set := func(k, v string) {
		if v != "" {
			_ = i.Set(k, v)
		}
	}
	if len(os.Args) > 0 {
		set("command", os.Args[0])
		set("argv", strings.Join(os.Args[1:], " "))
	}
	if r := live.Load(); r != nil {
		set("maxprocs", strconv.Itoa(r.size))
	}
	set("host", ProcessorName())
	set("arch", goruntime.GOOS+"/"+goruntime.GOARCH)
	if d, err := os.Getwd(); err == nil {
		set("wdir", d)
	}
	set("thread_level", provided.String())
	return i
}
