package adi

import "fmt"

// Class is an MPI error class. Each class is itself an error, so the sentinel
// values below can be matched with errors.Is against any error a call
// returns.
type Class int

// The MPI error classes.
const (
	ErrBuffer Class = iota + 1
	ErrCount
	ErrType
	ErrTag
	ErrComm
	ErrRank
	ErrRequest
	ErrRoot
	ErrGroup
	ErrOp
	ErrTopology
	ErrDims
	ErrArg
	ErrUnknown
	ErrTruncate
	ErrOther
	ErrIntern
	ErrInStatus
	ErrPending
	ErrNotSupported
	ErrSpawn   // a spawn could not start its processes
	ErrPort    // a port name is invalid or nobody accepts on it
	ErrService // a service name cannot be published or unpublished
	ErrName    // a service name that LookupName does not find
)

var classNames = map[Class]string{
	ErrBuffer: "MPI_ERR_BUFFER", ErrCount: "MPI_ERR_COUNT", ErrType: "MPI_ERR_TYPE",
	ErrTag: "MPI_ERR_TAG", ErrComm: "MPI_ERR_COMM", ErrRank: "MPI_ERR_RANK",
	ErrRequest: "MPI_ERR_REQUEST", ErrRoot: "MPI_ERR_ROOT", ErrGroup: "MPI_ERR_GROUP",
	ErrOp: "MPI_ERR_OP", ErrTopology: "MPI_ERR_TOPOLOGY", ErrDims: "MPI_ERR_DIMS",
	ErrArg: "MPI_ERR_ARG", ErrUnknown: "MPI_ERR_UNKNOWN", ErrTruncate: "MPI_ERR_TRUNCATE",
	ErrOther: "MPI_ERR_OTHER", ErrIntern: "MPI_ERR_INTERN", ErrInStatus: "MPI_ERR_IN_STATUS",
	ErrPending: "MPI_ERR_PENDING", ErrNotSupported: "MPI_ERR_UNSUPPORTED_OPERATION",
	ErrSpawn: "MPI_ERR_SPAWN", ErrPort: "MPI_ERR_PORT", ErrService: "MPI_ERR_SERVICE", ErrName: "MPI_ERR_NAME",
}

// Error is the class's MPI name.
func (c Class) Error() string {
	if n, ok := classNames[c]; ok {
		return n
	}
	return fmt.Sprintf("MPI error class %d", int(c))
}

// Error is an error of a given class raised by a named MPI call.
type Error struct {
	Class  Class
	Op     string // the call, e.g. "MPI_Send"
	Detail string // what was wrong, naming the bad value
	// Msg is set by a device for a receive that failed on a message
	// (Truncated, Mismatched): the message as the device saw it, which the
	// core restates in the program's terms (Restate) before the program
	// sees the error.
	Msg *Message
}

// Message is the message a receive failed on, as the device saw it.
type Message struct {
	Source   int    // world rank of the sender
	Tag      int    // the tag it carried on the device
	Size     int    // its size in bytes
	Capacity int    // the receive buffer's size in bytes (ErrTruncate)
	RecvType string // the receive's datatype (ErrType)
}

// Truncated is the ErrTruncate of a receive whose buffer of capacity bytes
// is too short for a message of size bytes from world rank src.
func Truncated(src, tag, size, capacity int) error {
	return &Error{Class: ErrTruncate, Op: "receive", Msg: &Message{Source: src, Tag: tag, Size: size, Capacity: capacity}}
}

// Mismatched is the ErrType of a receive of datatype recvType matching a
// message of size bytes from world rank src that was sent as a different
// basic type.
func Mismatched(src, tag, size int, recvType string) error {
	return &Error{Class: ErrType, Op: "receive", Msg: &Message{Source: src, Tag: tag, Size: size, RecvType: recvType}}
}

// NoTag, given to Restate as the tag, leaves the tag out: a collective's
// messages carry tags of the implementation's own, which mean nothing to
// the program.
const NoTag = -1 << 31

// Restate returns e attributed to the MPI call op, with its message (if it
// has one) described as the program knows it: from rank source (the
// sender's rank in the program's communicator) with tag tag, or no tag.
// An error that carries no message only takes the call's name.
func (e *Error) Restate(op string, source, tag int) *Error {
	n := &Error{Class: e.Class, Op: op, Detail: e.Detail}
	if m := e.Msg; m != nil {
		n.Detail = m.describe(e.Class, source, tag)
	}
	return n
}

// describe words a message's failure of class c: "message of 80 bytes from
// rank 0 (tag 7) is longer than the receive buffer (40 bytes)".
func (m *Message) describe(c Class, source, tag int) string {
	from := fmt.Sprintf("message of %d bytes from rank %d", m.Size, source)
	if tag != NoTag {
		from += fmt.Sprintf(" (tag %d)", tag)
	}
	switch c {
	case ErrTruncate:
		return fmt.Sprintf("%s is longer than the receive buffer (%d bytes)", from, m.Capacity)
	case ErrType:
		return fmt.Sprintf("%s was sent as a different basic type than the receive's %s", from, m.RecvType)
	}
	return from
}

// Error formats the error as "MPI_Send: MPI_ERR_RANK: dest 7 out of range [0,4)".
func (e *Error) Error() string {
	detail := e.Detail
	if e.Msg != nil && detail == "" {
		detail = e.Msg.describe(e.Class, e.Msg.Source, e.Msg.Tag) // not restated: world rank, device tag
	}
	s := e.Class.Error()
	if e.Op != "" {
		s = e.Op + ": " + s
	}
	if detail != "" {
		s += ": " + detail
	}
	return s
}

// Unwrap gives the class, so errors.Is(err, ErrRank) works.
func (e *Error) Unwrap() error { return e.Class }

// Errorf builds an *Error of class c for call op.
func Errorf(c Class, op, format string, args ...any) error {
	return &Error{Class: c, Op: op, Detail: fmt.Sprintf(format, args...)}
}
