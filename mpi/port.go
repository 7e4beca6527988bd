package mpi

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/adimpi/adimpi/internal/wire"
)

// Ports (MPI_Open_port and friends). A port is a TCP listener of the
// process that opened it; its name, "adimpi-port:TOKEN@IP:PORT", is all a
// client needs, and the token in it is the client's proof that it was told
// the name. Only the two roots use the port: they swap their groups'
// addresses and context masks through it (joinGroups), and the
// intercommunicator's messages then go through the inter-job channel.

const portPrefix = "adimpi-port:"

// portGreeting opens a client's connection to a port.
const portGreeting = "ADIMPI-PORT"

// MaxPortName is the longest port name OpenPort makes (MPI_MAX_PORT_NAME).
const MaxPortName = 256

type port struct {
	ln    net.Listener
	token string
}

var ports = struct {
	sync.Mutex
	m map[string]*port
}{m: map[string]*port{}}

// OpenPort opens a port on which CommAccept waits for clients
// (MPI_Open_port) and returns its name. info is unused (nil is fine).
func OpenPort(info *Info) (string, error) {
	const op = "MPI_Open_port"
	if _, err := current(op); err != nil {
		return "", err
	}
	ip, err := wire.HostAddr()
	if err != nil {
		return "", errorf(ErrOther, op, "%v", err)
	}
	ln, err := net.Listen("tcp4", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		return "", errorf(ErrOther, op, "listening: %v", err)
	}
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	p := &port{ln: ln, token: hex.EncodeToString(tok)}
	name := portPrefix + p.token + "@" + ln.Addr().String()
	ports.Lock()
	ports.m[name] = p
	ports.Unlock()
	return name, nil
}

// ClosePort closes a port that OpenPort opened (MPI_Close_port).
func ClosePort(name string) error {
	ports.Lock()
	p := ports.m[name]
	delete(ports.m, name)
	ports.Unlock()
	if p == nil {
		return errorf(ErrPort, "MPI_Close_port", "port %q was not opened by this process (or is closed)", name)
	}
	return p.ln.Close()
}

// parsePort splits a port name into its token and address.
func parsePort(op, name string) (token, addr string, err error) {
	rest, ok := strings.CutPrefix(name, portPrefix)
	if ok {
		token, addr, ok = strings.Cut(rest, "@")
	}
	if !ok || token == "" || addr == "" {
		return "", "", errorf(ErrPort, op, "%q is not a port name (want %sTOKEN@IP:PORT, from OpenPort)", name, portPrefix)
	}
	return token, addr, nil
}

// CommAccept waits for a client's CommConnect on port and returns the
// intercommunicator between comm's processes and the client's
// (MPI_Comm_accept). It is collective over comm; port and info matter at
// root only.
func CommAccept(portName string, info *Info, root int, comm *Comm) (*Comm, error) {
	const op = "MPI_Comm_accept"
	talk := func(msg []byte) ([]byte, error) { return acceptOn(op, portName, msg) }
	n, err := joinGroups(op, comm, root, talk, comm.Name()+".accept")
	return n, comm.raise(err)
}

// CommConnect connects to a port that a server's CommAccept waits on and
// returns the intercommunicator between comm's processes and the
// server's (MPI_Comm_connect). It is collective over comm; port and info
// matter at root only.
func CommConnect(portName string, info *Info, root int, comm *Comm) (*Comm, error) {
	const op = "MPI_Comm_connect"
	n, err := joinGroups(op, comm, root, func(msg []byte) ([]byte, error) {
		return dialPort(op, portName, msg)
	}, comm.Name()+".connect")
	return n, comm.raise(err)
}

var errNotClient = fmt.Errorf("not a client")

// servePort reads a client's greeting and half of the exchange on c and
// answers with msg.
func servePort(c net.Conn, token string, msg []byte) ([]byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if f := strings.Fields(line); err != nil || len(f) != 2 || f[0] != portGreeting || f[1] != token {
		return nil, errNotClient
	}
	other, err := readFramed(br)
	if err != nil {
		return nil, errNotClient
	}
	_ = c.SetReadDeadline(time.Time{})
	if err := writeFramed(c, msg); err != nil {
		return nil, errorf(ErrPort, "MPI_Comm_accept", "answering the client: %v", err)
	}
	return other, nil
}

// dialPort is a client's half of the exchange through a port.
func dialPort(op, name string, msg []byte) ([]byte, error) {
	token, addr, err := parsePort(op, name)
	if err != nil {
		return nil, err
	}
	c, err := net.DialTimeout("tcp4", addr, 10*time.Second)
	if err != nil {
		return nil, errorf(ErrPort, op, "port %q: nobody listens (%v)", name, err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "%s %s\n", portGreeting, token); err != nil {
		return nil, errorf(ErrPort, op, "port %q: %v", name, err)
	}
	if err := writeFramed(c, msg); err != nil {
		return nil, errorf(ErrPort, op, "port %q: %v", name, err)
	}
	other, err := readFramed(bufio.NewReader(c))
	if err != nil {
		return nil, errorf(ErrPort, op, "port %q: the server closed the connection without answering (%v)", name, err)
	}
	return other, nil
}

func writeFramed(w io.Writer, msg []byte) error {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(msg)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err := w.Write(msg)
	return err
}

func readFramed(r io.Reader) ([]byte, error) {
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size > 1<<30 {
		return nil, fmt.Errorf("a message of %d bytes", size)
	}
	b := make([]byte, size)
	_, err := io.ReadFull(r, b)
	return b, err
}

// CommDisconnect waits until every message on c has been delivered and
// frees c (MPI_Comm_disconnect), ending the connection that spawn,
// accept, connect or join made. It is collective over c (both groups of an
// intercommunicator).
func CommDisconnect(c *Comm) error {
	const op = "MPI_Comm_disconnect"
	if err := checkComm(op, c); err != nil {
		return err
	}
	if err := Barrier(c); err != nil {
		return err
	}
	parent.CompareAndSwap(c, nil)
	if err := c.free(); err != nil {
		return c.raise(named(op, err))
	}
	return nil
}
