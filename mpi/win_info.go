package mpi

import (
	"strings"
)

// winHints are the info keys of a window that adimpi acts on.
type winHints struct {
	noLocks      bool // no_locks=true: Lock and LockAll are refused
	sameSize     bool // same_size=true: checked at creation
	sameDispUnit bool // same_disp_unit=true: checked at creation
}

// parseHints reads a window's info keys; called with info locked (use).
// A known key with a value it cannot take is an ErrArg error; unknown keys
// are kept and ignored, as the standard asks.
func parseHints(op string, info *Info) (winHints, error) {
	var h winHints
	if info == nil {
		return h, nil
	}
	flag := func(key string, to *bool) error {
		v, ok := info.vals[key]
		if !ok {
			return nil
		}
		switch strings.TrimSpace(v) {
		case "true":
			*to = true
		case "false":
			*to = false
		default:
			return errorf(ErrArg, op, "info key %s has value %q, not true or false", key, v)
		}
		return nil
	}
	for key, to := range map[string]*bool{"no_locks": &h.noLocks, "same_size": &h.sameSize, "same_disp_unit": &h.sameDispUnit} {
		if err := flag(key, to); err != nil {
			return h, err
		}
	}
	if v, ok := info.vals["accumulate_ordering"]; ok {
		// adimpi always carries out one origin's accumulates to one
		// target in order (rar,raw,war,waw), which satisfies any ordering
		// asked for, "none" included.
		if v = strings.TrimSpace(v); v != "none" {
			for _, o := range strings.Split(v, ",") {
				switch strings.TrimSpace(o) {
				case "rar", "raw", "war", "waw":
				default:
					return h, errorf(ErrArg, op, "info key accumulate_ordering has value %q: %q is none of rar, raw, war, waw (or the whole value none)", v, o)
				}
			}
		}
	}
	if v, ok := info.vals["accumulate_ops"]; ok {
		// Accumulates are atomic whatever the operations mixed on a
		// location, which satisfies both values.
		if v = strings.TrimSpace(v); v != "same_op" && v != "same_op_no_op" {
			return h, errorf(ErrArg, op, "info key accumulate_ops has value %q, not same_op or same_op_no_op", v)
		}
	}
	return h, nil
}

// checkHints checks, once every rank's size and displacement unit are
// known, what same_size and same_disp_unit promised.
func (w *Win) checkHints(op string) error {
	for i := range w.sizes {
		if w.hints.sameSize && w.sizes[i] != w.sizes[w.comm.rank] {
			return errorf(ErrSize, op, "info same_size=true, but rank %d's window is %d bytes and this rank's %d", i, w.sizes[i], w.sizes[w.comm.rank])
		}
		if w.hints.sameDispUnit && w.units[i] != w.units[w.comm.rank] {
			return errorf(ErrDisp, op, "info same_disp_unit=true, but rank %d's displacement unit is %d and this rank's %d", i, w.units[i], w.units[w.comm.rank])
		}
	}
	return nil
}

// lockable refuses Lock and LockAll on a window made with no_locks=true.
func (w *Win) lockable(op string) error {
	if w.hints.noLocks {
		return errorf(ErrRMASync, op, "window %s was created with info no_locks=true: passive-target locks are not allowed on it", w.name)
	}
	return nil
}
