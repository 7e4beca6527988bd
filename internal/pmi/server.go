package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
)

// ErrDisconnected is wrapped by the error Serve returns when a rank's
// connection ends (or can no longer be written) before the rank sent
// cmd=finalize.
var ErrDisconnected = errors.New("connection closed before finalize")

// ErrAborted is wrapped by the error Serve returns after a rank sent
// cmd=abort.
var ErrAborted = errors.New("rank called abort")

// Abort describes a rank's cmd=abort request.
type Abort struct {
	Rank int    // the rank that aborted
	Code int    // the exit code it asked for
	Msg  string // its message, possibly empty
}

// Server is the launcher side of PMI-1 for one job of a fixed number of
// ranks. It keeps the job's key-value space and implements its barrier.
// Call Serve once per rank, each in its own goroutine.
type Server struct {
	size    int
	kvsname string
	aborts  chan Abort

	mu        sync.Mutex
	kvs       map[string]string
	ranks     []rankState
	barrierN  int           // ranks waiting in the current barrier
	barrierCh chan struct{} // closed when the current barrier completes
	stuck     chan struct{} // closed once some rank can never enter a barrier again
	stuckWhy  string
	firstLost int      // first rank that left without finalizing, or -1
	dynamic   *dynamic // spawn and the name service (spawn.go)
}

type rankState struct {
	serving     bool
	initialized bool
	finalized   bool
}

// NewServer returns a server for a job of size ranks whose key-value space
// is called kvsname.
func NewServer(size int, kvsname string) *Server {
	if size < 1 {
		panic("pmi: NewServer: size must be at least 1")
	}
	return &Server{
		size:      size,
		kvsname:   kvsname,
		aborts:    make(chan Abort, size),
		kvs:       make(map[string]string),
		ranks:     make([]rankState, size),
		barrierCh: make(chan struct{}),
		stuck:     make(chan struct{}),
		firstLost: -1,
	}
}

// Aborts delivers one Abort for each rank that sends cmd=abort. The
// channel has room for every rank, so the server never blocks on it.
func (s *Server) Aborts() <-chan Abort { return s.aborts }

// Finalized reports whether rank completed cmd=finalize.
func (s *Server) Finalized(rank int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rank >= 0 && rank < s.size && s.ranks[rank].finalized
}

// Initialized reports whether rank has sent cmd=init, that is, whether the
// process started using PMI at all.
func (s *Server) Initialized(rank int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rank >= 0 && rank < s.size && s.ranks[rank].initialized
}

// FirstLost returns the first rank whose PMI session ended without
// finalize (it disconnected, aborted or broke the protocol), or -1. When a
// rank dies, ranks waiting in a barrier fail soon after, so a launcher uses
// this to tell the original failure from its consequences.
func (s *Server) FirstLost() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.firstLost
}

// Serve speaks PMI-1 with the process of the given rank over conn until
// the process finalizes (Serve then returns nil), its connection ends
// (the error wraps ErrDisconnected), it aborts (the error wraps
// ErrAborted), or it breaks the protocol. Serve closes conn before
// returning. Once any rank has finalized, aborted or disconnected, barriers
// that can no longer complete fail (cmd=barrier_out rc=-1) instead of
// hanging.
func (s *Server) Serve(rank int, conn io.ReadWriteCloser) error {
	return s.serve(rank, conn, bufio.NewReader(conn))
}

// ServeListener accepts PMI_PORT-style connections on l until l is closed.
// Each process must be started with PMI_PORT set to l's address and PMI_ID
// set to its rank; it opens with cmd=initack pmiid=RANK and is then served
// as by Serve. Errors of individual connections are not reported; use
// Finalized and Aborts. ServeListener returns nil once l is closed.
func (s *Server) ServeListener(l net.Listener) error {
	for {
		conn, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("pmi: accept: %w", err)
		}
		go func() {
			r := bufio.NewReader(conn)
			rank, err := s.initack(conn, r)
			if err != nil {
				conn.Close()
				return
			}
			s.serve(rank, conn, r)
		}()
	}
}

// initack handles the PMI_PORT greeting and returns the connecting rank.
func (s *Server) initack(conn io.Writer, r *bufio.Reader) (int, error) {
	line, err := readLine(r)
	if err != nil {
		return 0, err
	}
	m, err := parseLine(line)
	if err != nil {
		return 0, err
	}
	id, err := strconv.Atoi(m.vals["pmiid"])
	if m.cmd != "initack" || err != nil || id < 0 || id >= s.size {
		return 0, fmt.Errorf("pmi: bad greeting %q", truncate(line, 200))
	}
	_, err = io.WriteString(conn, formatLine("initack")+
		formatLine("set", "size", strconv.Itoa(s.size))+
		formatLine("set", "rank", strconv.Itoa(id))+
		formatLine("set", "debug", "0"))
	return id, err
}

func (s *Server) serve(rank int, conn io.ReadWriteCloser, r *bufio.Reader) error {
	defer conn.Close()
	if rank < 0 || rank >= s.size {
		return fmt.Errorf("pmi: serve: rank %d out of range for a job of %d", rank, s.size)
	}
	s.mu.Lock()
	if s.ranks[rank].serving {
		s.mu.Unlock()
		return fmt.Errorf("pmi: serve: rank %d is already being served", rank)
	}
	s.ranks[rank].serving = true
	s.mu.Unlock()

	reply := func(cmd string, kv ...string) error {
		if _, err := io.WriteString(conn, formatLine(cmd, kv...)); err != nil {
			s.lose(rank, "could not be sent a PMI reply")
			return fmt.Errorf("pmi: rank %d: %w (sending %s: %v)", rank, ErrDisconnected, cmd, err)
		}
		return nil
	}
	fail := func(cmd, msg string) error {
		return reply(cmd, "rc", "-1", "msg", escapeText(msg))
	}

	for {
		line, err := readLine(r)
		if err != nil {
			s.lose(rank, "disconnected from PMI before finalize")
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("pmi: rank %d: %w", rank, ErrDisconnected)
			}
			return fmt.Errorf("pmi: rank %d: %w: %v", rank, ErrDisconnected, err)
		}
		if strings.HasPrefix(line, "mcmd=") {
			if err := s.mcmd(rank, line, r, conn); err != nil {
				s.lose(rank, "sent a malformed PMI spawn")
				return fmt.Errorf("pmi: rank %d: %w", rank, err)
			}
			continue
		}
		m, err := parseLine(line)
		if err != nil {
			s.lose(rank, "sent a malformed PMI message")
			return fmt.Errorf("pmi: rank %d: %w", rank, err)
		}
		switch m.cmd {
		case "init":
			if v, ok := m.get("pmi_version"); ok && v != "1" {
				err = reply("response_to_init", "rc", "-1", "pmi_version", "1", "pmi_subversion", "1",
					"msg", escapeText("only PMI version 1 is supported"))
				break
			}
			s.mu.Lock()
			s.ranks[rank].initialized = true
			s.mu.Unlock()
			err = reply("response_to_init", "rc", "0", "pmi_version", "1", "pmi_subversion", "1")
		case "get_maxes":
			err = reply("maxes", "rc", "0", "kvsname_max", strconv.Itoa(MaxKVSNameLen),
				"keylen_max", strconv.Itoa(MaxKeyLen), "vallen_max", strconv.Itoa(MaxValueLen))
		case "get_my_kvsname":
			err = reply("my_kvsname", "rc", "0", "kvsname", s.kvsname)
		case "get_universe_size":
			err = reply("universe_size", "rc", "0", "size", strconv.Itoa(s.universeSize()))
		case "get_appnum":
			err = reply("appnum", "rc", "0", "appnum", "0")
		case "put":
			err = s.put(m, reply, fail)
		case "get":
			err = s.get(m, reply, fail)
		case "barrier_in":
			if berr := s.barrier(); berr != nil {
				err = reply("barrier_out", "rc", "-1", "msg", escapeText(berr.Error()))
			} else {
				err = reply("barrier_out")
			}
		case "finalize":
			s.mu.Lock()
			s.ranks[rank].finalized = true
			s.mu.Unlock()
			s.markStuck(fmt.Sprintf("rank %d has finalized", rank))
			return reply("finalize_ack")
		case "abort":
			code, cerr := strconv.Atoi(m.vals["exitcode"])
			if cerr != nil {
				code = 1
			}
			msg := m.vals["msg"]
			if msg == "" {
				msg = m.vals["message"]
			}
			s.aborts <- Abort{Rank: rank, Code: code, Msg: unescapeText(msg)}
			s.lose(rank, fmt.Sprintf("aborted with exit code %d", code))
			return fmt.Errorf("pmi: rank %d: %w with exit code %d", rank, ErrAborted, code)
		default:
			var served bool
			if served, err = s.nameCmd(m, reply); !served {
				err = fail(m.cmd+"_result", "unknown command "+m.cmd)
			}
		}
		if err != nil {
			return err
		}
	}
}

func (s *Server) put(m message, reply func(string, ...string) error, fail func(string, string) error) error {
	if name, ok := m.get("kvsname"); ok && name != s.kvsname {
		return fail("put_result", "unknown kvsname "+name)
	}
	key, okk := m.get("key")
	value, okv := m.get("value")
	switch {
	case !okk || key == "":
		return fail("put_result", "missing key")
	case !okv:
		return fail("put_result", "missing value")
	case len(key) > MaxKeyLen:
		return fail("put_result", "key too long")
	case len(value) > MaxValueLen:
		return fail("put_result", "value too long")
	}
	s.mu.Lock()
	s.kvs[key] = value
	s.mu.Unlock()
	return reply("put_result", "rc", "0", "msg", "success")
}

func (s *Server) get(m message, reply func(string, ...string) error, fail func(string, string) error) error {
	if name, ok := m.get("kvsname"); ok && name != s.kvsname {
		return fail("get_result", "unknown kvsname "+name)
	}
	key, ok := m.get("key")
	if !ok || key == "" {
		return fail("get_result", "missing key")
	}
	s.mu.Lock()
	value, found := s.kvs[key]
	s.mu.Unlock()
	if !found {
		return reply("get_result", "rc", "-1", "msg", "key_not_found")
	}
	return reply("get_result", "rc", "0", "value", value)
}

// barrier blocks until all ranks have entered the current barrier, or
// fails once that can no longer happen.
func (s *Server) barrier() error {
	s.mu.Lock()
	select {
	case <-s.stuck:
		why := s.stuckWhy
		s.mu.Unlock()
		return fmt.Errorf("barrier cannot complete: %s", why)
	default:
	}
	done := s.barrierCh
	s.barrierN++
	if s.barrierN == s.size {
		close(done)
		s.barrierCh = make(chan struct{})
		s.barrierN = 0
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-s.stuck:
		// The barrier may have completed just before the job got stuck.
		select {
		case <-done:
			return nil
		default:
		}
		s.mu.Lock()
		why := s.stuckWhy
		s.mu.Unlock()
		return fmt.Errorf("barrier cannot complete: %s", why)
	}
}

// markStuck records that some rank will never enter another barrier and
// releases all waiting ranks with an error.
func (s *Server) markStuck(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stuck:
	default:
		s.stuckWhy = why
		close(s.stuck)
	}
}

// lose records that rank left the job without finalizing.
func (s *Server) lose(rank int, why string) {
	s.mu.Lock()
	if s.firstLost < 0 {
		s.firstLost = rank
	}
	s.mu.Unlock()
	s.markStuck(fmt.Sprintf("rank %d %s", rank, why))
}
