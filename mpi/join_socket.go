package mpi

import "io"

// CommJoin makes an intercommunicator of two processes connected by a
// socket (MPI_Comm_join): each calls it with its end of conn, and the
// other process is the remote group. conn is used for the exchange only
// and stays open; the messages go through the inter-job channel (or the
// device, when both processes belong to one job). Both sides must call
// CommJoin; the call is collective over MPI_COMM_SELF.
func CommJoin(conn io.ReadWriter) (*Comm, error) {
	const op = "MPI_Comm_join"
	r, err := current(op)
	if err != nil {
		return nil, err
	}
	return joinGroups(op, r.self, 0, func(msg []byte) ([]byte, error) {
		sent := make(chan error, 1)
		go func() { sent <- writeFramed(conn, msg) }()
		other, rerr := readFramed(conn)
		if err := <-sent; err != nil {
			return nil, errorf(ErrOther, op, "writing to the socket: %v", err)
		}
		if rerr != nil {
			return nil, errorf(ErrOther, op, "reading from the socket: %v", rerr)
		}
		return other, nil
	}, "MPI_COMM_JOIN")
}
