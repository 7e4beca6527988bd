package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
)

// Environment variables read by Connect.
const (
	// EnvFD names an inherited, already connected socket to the PMI server.
	EnvFD = "PMI_FD"
	// EnvPort is host:port of a PMI server to dial (used with EnvID).
	EnvPort = "PMI_PORT"
	// EnvID is the process's PMI id, sent in cmd=initack on a PMI_PORT
	// connection; the server answers with the rank and size.
	EnvID = "PMI_ID"
	// EnvRank is the process's rank (PMI_FD case).
	EnvRank = "PMI_RANK"
	// EnvSize is the number of processes in the job (PMI_FD case).
	EnvSize = "PMI_SIZE"
	// EnvDebug, when set to a non-empty value other than 0, makes the client
	// log every protocol line to stderr.
	EnvDebug = "ADIMPI_PMI_DEBUG"
)

// Client is one process's connection to its PMI server. All methods are
// safe for concurrent use; requests are serialized.
type Client struct {
	mu        sync.Mutex
	conn      io.ReadWriteCloser
	r         *bufio.Reader
	rank      int
	size      int
	kvsname   string
	singleton bool
	local     map[string]string // singleton key-value space
	keyMax    int
	valMax    int
	debug     bool
	done      bool  // finalized or aborted
	err       error // sticky I/O or protocol error
	// lostSpawn: err is a spawn's answer that did not come in time. The
	// connection can no longer be read (a late answer would be misread),
	// but an abort, which expects no answer, can still be written.
	lostSpawn bool
	v2        *pmi2State // the connection speaks PMI-2 (pmi2.go), nil for PMI-1
}

// fdUsed remembers which PMI_FD descriptors Connect has taken over.
var fdUsed struct {
	sync.Mutex
	done map[int]bool
}

// Connect connects to the PMI server described by the environment:
// PMI_FD (with PMI_RANK and PMI_SIZE), or PMI_PORT (with PMI_ID, or else
// PMI_RANK and PMI_SIZE). A PMI_FD connection speaks PMI-2 (pmi2.go) when
// PMI_JOBID is set too, as under srun --mpi=pmi2, and PMI-1 otherwise;
// ADIMPI_PMI_VERSION=1 or 2 overrides that choice. With neither PMI_FD nor
// PMI_PORT set the process runs as a singleton: rank 0 of 1, with a
// process-local key-value space, unless the environment shows that a
// launcher adimpi cannot talk to started it as one of several processes
// (Open MPI's mpirun, a PMIx launcher, srun without PMI): then Connect
// fails and says what to use.
// A PMI_FD descriptor can be connected only once per process.
func Connect() (*Client, error) {
	debug := os.Getenv(EnvDebug) != "" && os.Getenv(EnvDebug) != "0"
	if fdStr := os.Getenv(EnvFD); fdStr != "" {
		fd, err := strconv.Atoi(fdStr)
		if err != nil || fd < 0 {
			return nil, fmt.Errorf("pmi: connect: bad %s=%q", EnvFD, fdStr)
		}
		rank, size, err := rankSizeFromEnv()
		if err != nil {
			return nil, err
		}
		// The descriptor can be taken over only once: afterwards its
		// number may belong to an unrelated file.
		fdUsed.Lock()
		used := fdUsed.done[fd]
		if fdUsed.done == nil {
			fdUsed.done = make(map[int]bool)
		}
		fdUsed.done[fd] = true
		fdUsed.Unlock()
		if used {
			return nil, fmt.Errorf("pmi: connect: %s=%d was already used by an earlier Connect", EnvFD, fd)
		}
		conn, err := fdConn(fd)
		if err != nil {
			return nil, err
		}
		if v2, err := usePMI2(); err != nil || v2 {
			if err != nil {
				conn.Close()
				return nil, err
			}
			return newClient2(conn, rank, os.Getenv(EnvJobID), debug)
		}
		return newClient(conn, rank, size, debug)
	}
	if port := os.Getenv(EnvPort); port != "" {
		conn, err := net.Dial("tcp", port)
		if err != nil {
			return nil, fmt.Errorf("pmi: connect: dial %s=%s: %w", EnvPort, port, err)
		}
		if idStr := os.Getenv(EnvID); idStr != "" {
			id, err := strconv.Atoi(idStr)
			if err != nil || id < 0 {
				conn.Close()
				return nil, fmt.Errorf("pmi: connect: bad %s=%q", EnvID, idStr)
			}
			return newPortClient(conn, id, debug)
		}
		rank, size, err := rankSizeFromEnv()
		if err != nil {
			conn.Close()
			return nil, err
		}
		return newClient(conn, rank, size, debug)
	}
	if err := checkForeignLauncher(); err != nil {
		return nil, err
	}
	return NewSingleton(), nil
}

// NewSingleton returns a client for a process started without a launcher:
// rank 0 of 1, Put and Get use a local map and Barrier does nothing.
func NewSingleton() *Client {
	return &Client{
		size:      1,
		kvsname:   "singleton_kvs",
		singleton: true,
		local:     make(map[string]string),
		keyMax:    MaxKeyLen,
		valMax:    MaxValueLen,
	}
}

// NewClient performs the PMI-1 handshake (init, get_maxes,
// get_my_kvsname) over conn for the process with the given rank in a job
// of size processes. The client owns conn from then on.
func NewClient(conn io.ReadWriteCloser, rank, size int) (*Client, error) {
	return newClient(conn, rank, size, false)
}

func rankSizeFromEnv() (rank, size int, err error) {
	rs, ss := os.Getenv(EnvRank), os.Getenv(EnvSize)
	rank, err1 := strconv.Atoi(rs)
	size, err2 := strconv.Atoi(ss)
	if err1 != nil || err2 != nil || size < 1 || rank < 0 || rank >= size {
		return 0, 0, fmt.Errorf("pmi: connect: bad or missing %s=%q / %s=%q", EnvRank, rs, EnvSize, ss)
	}
	return rank, size, nil
}

// fdConn wraps an inherited descriptor. Sockets become net.Conns; anything
// else (for example a pipe pair faked by a test) is used as a plain file.
func fdConn(fd int) (io.ReadWriteCloser, error) {
	f := os.NewFile(uintptr(fd), "pmi-fd")
	if f == nil {
		return nil, fmt.Errorf("pmi: connect: %s=%d is not a valid descriptor", EnvFD, fd)
	}
	c, err := net.FileConn(f)
	if err == nil {
		f.Close() // FileConn dups the descriptor
		return c, nil
	}
	if _, serr := f.Stat(); serr != nil {
		return nil, fmt.Errorf("pmi: connect: %s=%d: %w", EnvFD, fd, serr)
	}
	return f, nil
}

func newPortClient(conn io.ReadWriteCloser, id int, debug bool) (*Client, error) {
	c := &Client{conn: conn, r: bufio.NewReader(conn), debug: debug, rank: -1, size: -1}
	fail := func(err error) (*Client, error) {
		conn.Close()
		return nil, err
	}
	if err := c.send(formatLine("initack", "pmiid", strconv.Itoa(id))); err != nil {
		return fail(fmt.Errorf("pmi: initack: %w", err))
	}
	if _, err := c.recv("initack", "initack"); err != nil {
		return fail(err)
	}
	// The server answers with "cmd=set size=N", "cmd=set rank=N" and
	// "cmd=set debug=N"; accept them in any order.
	for i := 0; i < 3; i++ {
		m, err := c.recv("initack", "set")
		if err != nil {
			return fail(err)
		}
		for k, v := range m.vals {
			if k != "size" && k != "rank" {
				continue
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fail(fmt.Errorf("pmi: initack: bad %s=%q from server", k, v))
			}
			if k == "size" {
				c.size = n
			} else {
				c.rank = n
			}
		}
	}
	if c.size < 1 || c.rank < 0 || c.rank >= c.size {
		return fail(fmt.Errorf("pmi: initack: server gave rank %d of size %d", c.rank, c.size))
	}
	return c.handshake()
}

func newClient(conn io.ReadWriteCloser, rank, size int, debug bool) (*Client, error) {
	if size < 1 || rank < 0 || rank >= size {
		conn.Close()
		return nil, fmt.Errorf("pmi: connect: invalid rank %d of size %d", rank, size)
	}
	c := &Client{conn: conn, r: bufio.NewReader(conn), rank: rank, size: size, debug: debug}
	return c.handshake()
}

// handshake runs init, get_maxes and get_my_kvsname.
func (c *Client) handshake() (*Client, error) {
	fail := func(err error) (*Client, error) {
		c.conn.Close()
		return nil, err
	}
	m, err := c.call("init", "response_to_init", "pmi_version", "1", "pmi_subversion", "1")
	if err != nil {
		return fail(err)
	}
	if v, ok := m.get("pmi_version"); ok && v != "1" {
		return fail(fmt.Errorf("pmi: init: server speaks PMI version %s, need 1", v))
	}
	c.keyMax, c.valMax = MaxKeyLen, MaxValueLen
	m, err = c.call("get_maxes", "maxes")
	if err != nil {
		return fail(err)
	}
	// Respect tighter server limits; never exceed our own.
	if n, err := strconv.Atoi(m.vals["keylen_max"]); err == nil && n > 0 && n < c.keyMax {
		c.keyMax = n
	}
	if n, err := strconv.Atoi(m.vals["vallen_max"]); err == nil && n > 0 && n < c.valMax {
		c.valMax = n
	}
	m, err = c.call("get_my_kvsname", "my_kvsname")
	if err != nil {
		return fail(err)
	}
	name, ok := m.get("kvsname")
	if !ok || name == "" {
		return fail(errors.New("pmi: get_my_kvsname: reply has no kvsname"))
	}
	c.kvsname = name
	return c, nil
}

// Rank returns this process's rank in the job.
func (c *Client) Rank() int { return c.rank }

// Size returns the number of processes in the job.
func (c *Client) Size() int { return c.size }

// KVSName returns the name of the job's key-value space.
func (c *Client) KVSName() string { return c.kvsname }

// Singleton reports whether the process runs without a PMI server.
func (c *Client) Singleton() bool { return c.singleton }

// Put stores value under key in the job's key-value space. Keys are at
// most 64 bytes and values at most 1024 bytes (or the server's smaller
// limits); neither may contain spaces, tabs, newlines or '=', and the key
// must not be empty. A put becomes visible to every rank once all ranks
// have passed the next Barrier.
func (c *Client) Put(key, value string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable("put"); err != nil {
		return err
	}
	if err := checkToken("key", key, c.keyMax, false); err != nil {
		return fmt.Errorf("pmi: put: %w", err)
	}
	if err := checkToken("value", value, c.valMax, true); err != nil {
		return fmt.Errorf("pmi: put %q: %w", key, err)
	}
	if c.singleton {
		c.local[key] = value
		return nil
	}
	if c.v2 != nil {
		return c.put2(key, value)
	}
	_, err := c.call("put", "put_result", "kvsname", c.kvsname, "key", key, "value", value)
	return err
}

// Barrier blocks until every rank of the job has entered the barrier.
// Puts made by any rank before the barrier are visible to Get after it.
func (c *Client) Barrier() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable("barrier"); err != nil {
		return err
	}
	if c.singleton {
		return nil
	}
	if c.v2 != nil {
		return c.fence2()
	}
	_, err := c.call("barrier_in", "barrier_out")
	return err
}

// Get returns the value stored under key. If no rank put the key the error
// wraps ErrKeyNotFound.
func (c *Client) Get(key string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable("get"); err != nil {
		return "", err
	}
	if err := checkToken("key", key, c.keyMax, false); err != nil {
		return "", fmt.Errorf("pmi: get: %w", err)
	}
	if c.singleton {
		v, ok := c.local[key]
		if !ok {
			return "", fmt.Errorf("pmi: get %q: %w", key, ErrKeyNotFound)
		}
		return v, nil
	}
	if c.v2 != nil {
		return c.get2(key)
	}
	if err := c.send(formatLine("get", "kvsname", c.kvsname, "key", key)); err != nil {
		return "", c.broken(fmt.Errorf("pmi: get %q: %w", key, err))
	}
	m, err := c.recv("get", "get_result")
	if err != nil {
		return "", err
	}
	rc, err := m.rc()
	if err != nil {
		return "", c.broken(fmt.Errorf("pmi: get %q: %w", key, err))
	}
	if rc != 0 {
		return "", fmt.Errorf("pmi: get %q: %w (server rc=%d msg=%s)", key, ErrKeyNotFound, rc, m.vals["msg"])
	}
	v, ok := m.get("value")
	if !ok {
		return "", c.broken(fmt.Errorf("pmi: get %q: reply has no value", key))
	}
	return v, nil
}

// Finalize tells the server this process is done with PMI, waits for the
// acknowledgement and closes the connection. Calling it again does nothing.
func (c *Client) Finalize() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return nil
	}
	if c.singleton {
		c.done = true
		return nil
	}
	if c.err != nil {
		return fmt.Errorf("pmi: finalize: connection unusable after earlier error: %w", c.err)
	}
	var err error
	if c.v2 != nil {
		err = c.finalize2()
	} else {
		_, err = c.call("finalize", "finalize_ack")
	}
	c.done = true
	if cerr := c.conn.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("pmi: finalize: close: %w", cerr)
	}
	return err
}

// Abort asks the launcher to kill the whole job with exit code code; msg
// (free text) is passed along for the launcher to print. There is no reply:
// the caller should exit with code itself if it is still running after
// Abort returns. In singleton mode Abort only records that the client is
// done.
func (c *Client) Abort(code int, msg string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return errors.New("pmi: abort: client already finalized or aborted")
	}
	c.done = true
	if c.singleton {
		return nil
	}
	if c.err != nil && !c.lostSpawn {
		return fmt.Errorf("pmi: abort: connection unusable after earlier error: %w", c.err)
	}
	if c.v2 != nil {
		return c.abort2(code, msg)
	}
	kv := []string{"exitcode", strconv.Itoa(code)}
	if msg != "" {
		kv = append(kv, "msg", truncate(escapeText(msg), MaxValueLen))
	}
	if err := c.send(formatLine("abort", kv...)); err != nil {
		return c.broken(fmt.Errorf("pmi: abort: %w", err))
	}
	return nil
}

// usable reports why the client cannot run cmd, if it cannot.
func (c *Client) usable(cmd string) error {
	if c.done {
		return fmt.Errorf("pmi: %s: client already finalized or aborted", cmd)
	}
	if c.err != nil {
		return fmt.Errorf("pmi: %s: connection unusable after earlier error: %w", cmd, c.err)
	}
	return nil
}

// broken records err as the client's sticky error and returns it.
func (c *Client) broken(err error) error {
	if c.err == nil {
		c.err = err
	}
	return err
}

// call sends cmd with the given key/value pairs, reads the reply, checks
// that it is expect and that its rc (if any) is 0.
func (c *Client) call(cmd, expect string, kv ...string) (message, error) {
	if err := c.send(formatLine(cmd, kv...)); err != nil {
		return message{}, c.broken(fmt.Errorf("pmi: %s: %w", cmd, err))
	}
	m, err := c.recv(cmd, expect)
	if err != nil {
		return message{}, err
	}
	rc, err := m.rc()
	if err != nil {
		return message{}, c.broken(fmt.Errorf("pmi: %s: %w", cmd, err))
	}
	if rc != 0 {
		if msg, ok := m.get("msg"); ok {
			return message{}, fmt.Errorf("pmi: %s: server returned rc=%d: %s", cmd, rc, unescapeText(msg))
		}
		return message{}, fmt.Errorf("pmi: %s: server returned rc=%d", cmd, rc)
	}
	return m, nil
}

func (c *Client) send(line string) error {
	if c.debug {
		fmt.Fprintf(os.Stderr, "pmi[%d] -> %s", c.rank, line)
	}
	_, err := io.WriteString(c.conn, line)
	return err
}

// recv reads one reply line for request cmd and checks that it is expect.
func (c *Client) recv(cmd, expect string) (message, error) {
	line, err := readLine(c.r)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("server closed the connection")
		}
		return message{}, c.broken(fmt.Errorf("pmi: %s: reading reply: %w", cmd, err))
	}
	if c.debug {
		fmt.Fprintf(os.Stderr, "pmi[%d] <- %s", c.rank, line)
	}
	m, err := parseLine(line)
	if err != nil {
		return message{}, c.broken(fmt.Errorf("pmi: %s: %w", cmd, err))
	}
	if m.cmd != expect {
		return message{}, c.broken(fmt.Errorf("pmi: %s: expected cmd=%s reply, got %q", cmd, expect, truncate(line, 200)))
	}
	return m, nil
}
