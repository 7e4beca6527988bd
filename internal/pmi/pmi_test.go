package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// job is a server plus one connected client per rank, all in-process.
type job struct {
	srv     *Server
	clients []*Client
	errs    []chan error // Serve's result per rank
}

// pipePair returns a connected pair of in-memory or socketpair conns.
func pipePair(t *testing.T, socket bool) (client, server net.Conn) {
	t.Helper()
	if !socket {
		return net.Pipe()
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conv := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "sp")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return conv(fds[0]), conv(fds[1])
}

func startJob(t *testing.T, n int, socket bool) *job {
	t.Helper()
	j := &job{srv: NewServer(n, "testkvs"), clients: make([]*Client, n), errs: make([]chan error, n)}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := 0; r < n; r++ {
		cc, sc := pipePair(t, socket)
		j.errs[r] = make(chan error, 1)
		go func(r int) { j.errs[r] <- j.srv.Serve(r, sc) }(r)
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			j.clients[r], errs[r] = NewClient(cc, r, n)
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: NewClient: %v", r, err)
		}
	}
	return j
}

// serveResult waits for rank's Serve to return.
func (j *job) serveResult(t *testing.T, rank int) error {
	t.Helper()
	select {
	case err := <-j.errs[rank]:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("Serve for rank %d did not return", rank)
		return nil
	}
}

// forAll runs f concurrently for every rank and fails on the first error.
func (j *job) forAll(t *testing.T, f func(c *Client) error) {
	t.Helper()
	errs := make([]error, len(j.clients))
	var wg sync.WaitGroup
	for r, c := range j.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(c)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func TestPutBarrierGet(t *testing.T) {
	for _, socket := range []bool{false, true} {
		t.Run(fmt.Sprintf("socket=%t", socket), func(t *testing.T) {
			const n = 5
			j := startJob(t, n, socket)
			for round := 0; round < 3; round++ {
				j.forAll(t, func(c *Client) error {
					if c.Rank() < 0 || c.Size() != n || c.KVSName() != "testkvs" || c.Singleton() {
						return fmt.Errorf("bad identity rank=%d size=%d kvs=%q", c.Rank(), c.Size(), c.KVSName())
					}
					if err := c.Put(fmt.Sprintf("k%d", c.Rank()), fmt.Sprintf("r%d-round%d", c.Rank(), round)); err != nil {
						return err
					}
					if err := c.Barrier(); err != nil {
						return err
					}
					for r := 0; r < n; r++ {
						v, err := c.Get(fmt.Sprintf("k%d", r))
						if err != nil {
							return err
						}
						if want := fmt.Sprintf("r%d-round%d", r, round); v != want {
							return fmt.Errorf("get k%d = %q, want %q", r, v, want)
						}
					}
					// Nobody may overwrite before everyone has read.
					return c.Barrier()
				})
			}
			j.forAll(t, func(c *Client) error {
				_, err := c.Get("missing")
				if !errors.Is(err, ErrKeyNotFound) {
					return fmt.Errorf("get missing: got %v, want ErrKeyNotFound", err)
				}
				return c.Finalize()
			})
			for r := 0; r < n; r++ {
				if err := j.serveResult(t, r); err != nil {
					t.Errorf("Serve(%d) = %v, want nil", r, err)
				}
				if !j.srv.Finalized(r) || !j.srv.Initialized(r) {
					t.Errorf("rank %d: Finalized=%t Initialized=%t", r, j.srv.Finalized(r), j.srv.Initialized(r))
				}
			}
			// Use after finalize is an error; Finalize twice is not.
			c := j.clients[0]
			if err := c.Put("a", "b"); err == nil || !strings.Contains(err.Error(), "put") {
				t.Errorf("put after finalize: %v", err)
			}
			if err := c.Finalize(); err != nil {
				t.Errorf("second finalize: %v", err)
			}
		})
	}
}

func TestConcurrentClientUse(t *testing.T) {
	j := startJob(t, 2, true)
	j.forAll(t, func(c *Client) error {
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 5; i++ {
					k := fmt.Sprintf("r%dg%di%d", c.Rank(), g, i)
					if err := c.Put(k, k); err != nil {
						errs <- err
						return
					}
					if v, err := c.Get(k); err != nil || v != k {
						errs <- fmt.Errorf("get %s = %q, %v", k, v, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		return c.Finalize()
	})
}

func TestPutValidation(t *testing.T) {
	for _, c := range []*Client{NewSingleton(), startJob(t, 1, false).clients[0]} {
		bad := []struct{ key, value string }{
			{"", "v"},
			{"has space", "v"},
			{"has=eq", "v"},
			{strings.Repeat("k", MaxKeyLen+1), "v"},
			{"k", "two words"},
			{"k", "line\nbreak"},
			{"k", "a=b"},
			{"k", "tab\there"},
			{"k", strings.Repeat("v", MaxValueLen+1)},
		}
		for _, b := range bad {
			if err := c.Put(b.key, b.value); err == nil {
				t.Errorf("singleton=%t: Put(%q, %q) succeeded", c.Singleton(), truncate(b.key, 10), truncate(b.value, 10))
			} else if !strings.HasPrefix(err.Error(), "pmi: put") {
				t.Errorf("error does not name the command: %v", err)
			}
		}
		if err := c.Put(strings.Repeat("k", MaxKeyLen), strings.Repeat("v", MaxValueLen)); err != nil {
			t.Errorf("maximal put: %v", err)
		}
		if err := c.Put("empty", ""); err != nil {
			t.Errorf("empty value: %v", err)
		}
		if v, err := c.Get("empty"); err != nil || v != "" {
			t.Errorf("get empty = %q, %v", v, err)
		}
		if err := c.Finalize(); err != nil {
			t.Error(err)
		}
	}
}

// unsetForeign clears, for the test, every variable by which Connect
// recognises a launcher it cannot talk to.
func unsetForeign(t *testing.T) {
	for _, l := range foreignLaunchers {
		for _, v := range []string{l.sizeVar, l.rankVar} {
			if v != "" {
				t.Setenv(v, "")
				os.Unsetenv(v)
			}
		}
	}
}

func TestSingleton(t *testing.T) {
	t.Setenv(EnvFD, "")
	t.Setenv(EnvPort, "")
	unsetForeign(t)
	c, err := Connect()
	if err != nil {
		t.Fatal(err)
	}
	if !c.Singleton() || c.Rank() != 0 || c.Size() != 1 || c.KVSName() == "" {
		t.Fatalf("singleton identity: singleton=%t rank=%d size=%d kvs=%q", c.Singleton(), c.Rank(), c.Size(), c.KVSName())
	}
	if err := c.Put("a", "1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get("a"); err != nil || v != "1" {
		t.Fatalf("get a = %q, %v", v, err)
	}
	if _, err := c.Get("b"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("get b: %v", err)
	}
	if err := c.Finalize(); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); err == nil {
		t.Fatal("barrier after finalize succeeded")
	}
}

// A process started as one of several by a launcher that offers no PMI-1
// server fails to connect, naming the launcher and what to use instead;
// one started alone still runs as a singleton.
func TestForeignLauncher(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string // "" = a singleton
	}{
		{map[string]string{"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "2"}, "Open MPI's mpirun/mpiexec (Debian's default mpiexec when Open MPI is installed), which speaks PMIx (OMPI_COMM_WORLD_SIZE=4)"},
		{map[string]string{"OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "0"}, ""},
		{map[string]string{"PMIX_RANK": "0"}, "a PMIx launcher (Open MPI's prterun, or srun --mpi=pmix) (PMIX_RANK=0)"},
		{map[string]string{"SLURM_STEP_NUM_TASKS": "8", "SLURM_PROCID": "3"}, "Slurm's srun without PMI (run it with srun --mpi=pmi2, or set MpiDefault=pmi2 in slurm.conf) (SLURM_STEP_NUM_TASKS=8)"},
		{map[string]string{"SLURM_STEP_NUM_TASKS": "1", "SLURM_PROCID": "0"}, ""},
		{map[string]string{"MV2_COMM_WORLD_SIZE": "2"}, "MVAPICH's mpirun_rsh (MV2_COMM_WORLD_SIZE=2)"},
		{map[string]string{"PMI_SIZE": "3", "PMI_RANK": "1"}, "gave neither PMI_FD nor PMI_PORT (PMI_SIZE=3)"},
	} {
		t.Run(fmt.Sprint(tc.env), func(t *testing.T) {
			t.Setenv(EnvFD, "")
			t.Setenv(EnvPort, "")
			unsetForeign(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := Connect()
			if tc.want == "" {
				if err != nil || !c.Singleton() {
					t.Fatalf("want a singleton, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Connect ran as a singleton (rank %d of %d), want an error", c.Rank(), c.Size())
			}
			for _, w := range []string{tc.want, "adimpi's mpirun", "mpiexec.hydra"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestConnectFD exercises the PMI_FD path of Connect with a socketpair.
func TestConnectFD(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	srvFile := os.NewFile(uintptr(fds[1]), "srv")
	srv := NewServer(1, "fdkvs")
	done := make(chan error, 1)
	go func() { done <- srv.Serve(0, srvFile) }()
	t.Setenv(EnvPort, "")
	t.Setenv(EnvFD, strconv.Itoa(fds[0]))
	t.Setenv(EnvRank, "0")
	t.Setenv(EnvSize, "1")
	c, err := Connect()
	if err != nil {
		t.Fatal(err)
	}
	if c.Singleton() || c.KVSName() != "fdkvs" || c.Size() != 1 {
		t.Fatalf("identity: singleton=%t kvs=%q size=%d", c.Singleton(), c.KVSName(), c.Size())
	}
	if err := c.Put("x", "y"); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	if err := c.Finalize(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := Connect(); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("second Connect with the same PMI_FD: %v", err)
	}
}

func TestConnectEnvErrors(t *testing.T) {
	t.Setenv(EnvPort, "")
	for _, env := range [][3]string{
		{"notanumber", "0", "1"},
		{"99", "", "1"},
		{"99", "3", "2"},
	} {
		t.Setenv(EnvFD, env[0])
		t.Setenv(EnvRank, env[1])
		t.Setenv(EnvSize, env[2])
		if _, err := Connect(); err == nil || !strings.Contains(err.Error(), "connect") {
			t.Errorf("env %v: Connect error = %v", env, err)
		}
	}
}

// TestPort exercises PMI_PORT/PMI_ID with ServeListener.
func TestPort(t *testing.T) {
	const n = 3
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv := NewServer(n, "portkvs")
	go srv.ServeListener(l)

	// Rank 0 goes through Connect and the environment.
	t.Setenv(EnvFD, "")
	t.Setenv(EnvPort, l.Addr().String())
	t.Setenv(EnvID, "0")
	clients := make([]*Client, n)
	clients[0], err = Connect()
	if err != nil {
		t.Fatal(err)
	}
	for r := 1; r < n; r++ {
		conn, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if clients[r], err = newPortClient(conn, r, false); err != nil {
			t.Fatal(err)
		}
	}
	j := &job{clients: clients}
	j.forAll(t, func(c *Client) error {
		if c.Size() != n || c.KVSName() != "portkvs" {
			return fmt.Errorf("identity size=%d kvs=%q", c.Size(), c.KVSName())
		}
		if err := c.Put(fmt.Sprint("p", c.Rank()), fmt.Sprint(c.Rank()*10)); err != nil {
			return err
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		v, err := c.Get(fmt.Sprint("p", (c.Rank()+1)%n))
		if err != nil {
			return err
		}
		if want := fmt.Sprint(((c.Rank() + 1) % n) * 10); v != want {
			return fmt.Errorf("got %q want %q", v, want)
		}
		return c.Finalize()
	})
	for r := 0; r < n; r++ {
		if !srv.Finalized(r) {
			t.Errorf("rank %d not finalized", r)
		}
	}
}

// TestDisconnectBreaksBarrier checks that ranks waiting in a barrier are
// released with an error when another rank goes away without finalizing.
func TestDisconnectBreaksBarrier(t *testing.T) {
	const n = 3
	j := startJob(t, n, true)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = j.clients[r].Barrier()
		}()
	}
	j.clients[2].conn.Close()
	if err := j.serveResult(t, 2); !errors.Is(err, ErrDisconnected) {
		t.Errorf("Serve(2) = %v, want ErrDisconnected", err)
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "barrier") || !strings.Contains(err.Error(), "rank 2") {
			t.Errorf("rank %d barrier error = %v", r, err)
		}
	}
	// The job stays usable for finalize and abort.
	if err := j.clients[0].Finalize(); err != nil {
		t.Error(err)
	}
	if err := j.serveResult(t, 0); err != nil {
		t.Error(err)
	}
	if j.srv.Finalized(2) {
		t.Error("rank 2 reported finalized")
	}
}

func TestFinalizedRankFailsLaterBarrier(t *testing.T) {
	j := startJob(t, 2, false)
	if err := j.clients[0].Finalize(); err != nil {
		t.Fatal(err)
	}
	err := j.clients[1].Barrier()
	if err == nil || !strings.Contains(err.Error(), "rank 0 has finalized") {
		t.Fatalf("barrier after peer finalized: %v", err)
	}
}

func TestAbort(t *testing.T) {
	j := startJob(t, 2, true)
	if err := j.clients[1].Abort(5, "it went wrong: x=1 100%"); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-j.srv.Aborts():
		if a.Rank != 1 || a.Code != 5 || a.Msg != "it went wrong: x=1 100%" {
			t.Errorf("abort = %+v", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no abort delivered")
	}
	if err := j.serveResult(t, 1); !errors.Is(err, ErrAborted) {
		t.Errorf("Serve(1) = %v, want ErrAborted", err)
	}
	if err := j.clients[0].Barrier(); err == nil {
		t.Error("barrier with an aborted peer succeeded")
	}
	if err := j.clients[1].Put("a", "b"); err == nil {
		t.Error("put after abort succeeded")
	}
}

// rawRank connects to srv as rank with a raw line-level connection.
func rawRank(t *testing.T, srv *Server, rank int) (net.Conn, *bufio.Reader, chan error) {
	t.Helper()
	cc, sc := pipePair(t, true)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(rank, sc) }()
	return cc, bufio.NewReader(cc), done
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string) string {
	t.Helper()
	if _, err := io.WriteString(c, line); err != nil {
		t.Fatal(err)
	}
	reply, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("after %q: %v", line, err)
	}
	return reply
}

func TestServerProtocol(t *testing.T) {
	srv := NewServer(1, "kvs")
	c, r, done := rawRank(t, srv, 0)
	for _, tc := range []struct{ send, want string }{
		{"cmd=init pmi_version=1 pmi_subversion=1\n", "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n"},
		{"cmd=get_maxes\n", "cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024\n"},
		{"cmd=get_my_kvsname\n", "cmd=my_kvsname rc=0 kvsname=kvs\n"},
		{"cmd=get_universe_size\n", "cmd=universe_size rc=0 size=1\n"},
		{"cmd=get_appnum\n", "cmd=appnum rc=0 appnum=0\n"},
		{"cmd=put kvsname=kvs key=a value=b\n", "cmd=put_result rc=0 msg=success\n"},
		{"cmd=put kvsname=other key=a value=b\n", "cmd=put_result rc=-1 msg=unknown%20kvsname%20other\n"},
		{"cmd=put kvsname=kvs value=b\n", "cmd=put_result rc=-1 msg=missing%20key\n"},
		{"cmd=get kvsname=kvs key=a\n", "cmd=get_result rc=0 value=b\n"},
		{"  cmd=get   key=a kvsname=kvs extra=ignored \r\n", "cmd=get_result rc=0 value=b\n"},
		{"cmd=get kvsname=kvs key=zz\n", "cmd=get_result rc=-1 msg=key_not_found\n"},
		{"cmd=frobnicate\n", "cmd=frobnicate_result rc=-1 msg=unknown%20command%20frobnicate\n"},
		{"cmd=barrier_in\n", "cmd=barrier_out\n"},
		{"cmd=finalize\n", "cmd=finalize_ack\n"},
	} {
		if got := roundTrip(t, c, r, tc.send); got != tc.want {
			t.Errorf("sent %q: got %q, want %q", tc.send, got, tc.want)
		}
	}
	if err := <-done; err != nil {
		t.Errorf("Serve = %v", err)
	}
	if !srv.Finalized(0) {
		t.Error("not finalized")
	}
}

func TestServerMalformed(t *testing.T) {
	for _, bad := range []string{
		"garbage\n",
		"cmd=put key\n",
		"key=a value=b\n",
		"=x cmd=get\n",
		"\n",
		"cmd=put value=" + strings.Repeat("x", maxLineLen+10) + "\n",
	} {
		srv := NewServer(2, "kvs")
		c, r, done := rawRank(t, srv, 0)
		// Rank 1 waits in a barrier that can never complete.
		c1, r1, done1 := rawRank(t, srv, 1)
		barrier := make(chan string, 1)
		go func() { barrier <- roundTrip(t, c1, r1, "cmd=barrier_in\n") }()
		roundTrip(t, c, r, "cmd=init pmi_version=1 pmi_subversion=1\n")
		if _, err := io.WriteString(c, bad); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%q: Serve returned nil", truncate(bad, 30))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%q: Serve did not return", truncate(bad, 30))
		}
		if got := <-barrier; !strings.HasPrefix(got, "cmd=barrier_out rc=-1 ") {
			t.Errorf("%q: waiting barrier got %q", truncate(bad, 30), got)
		}
		c.Close()
		c1.Close()
		<-done1
	}
}

func TestServeArgs(t *testing.T) {
	srv := NewServer(1, "kvs")
	_, sc := pipePair(t, false)
	if err := srv.Serve(1, sc); err == nil {
		t.Error("Serve accepted rank out of range")
	}
	c, r, _ := rawRank(t, srv, 0)
	roundTrip(t, c, r, "cmd=init pmi_version=1 pmi_subversion=1\n") // Serve(0) is running
	_, sc2 := pipePair(t, false)
	if err := srv.Serve(0, sc2); err == nil {
		t.Error("Serve accepted a rank twice")
	}
	roundTrip(t, c, r, "cmd=finalize\n")
}

// fakeServer answers the client's requests with replies, in order, and
// then closes the connection after reading one more request.
func fakeServer(t *testing.T, replies ...string) net.Conn {
	cc, sc := net.Pipe()
	go func() {
		defer sc.Close()
		r := bufio.NewReader(sc)
		for _, reply := range replies {
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
			io.WriteString(sc, reply)
		}
		r.ReadString('\n') // the next request goes unanswered
	}()
	return cc
}

func TestClientBadReplies(t *testing.T) {
	okInit := "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n"
	for _, tc := range []struct {
		replies []string
		want    string
	}{
		{[]string{"garbage\n"}, "init: malformed token"},
		{[]string{"cmd=maxes rc=0\n"}, "init: expected cmd=response_to_init"},
		{[]string{"cmd=response_to_init rc=-1 msg=go%20away\n"}, "init: server returned rc=-1: go away"},
		{[]string{"cmd=response_to_init rc=x\n"}, "init: bad rc"},
		{[]string{"cmd=response_to_init rc=0 pmi_version=2\n"}, "PMI version 2"},
		{[]string{}, "init: reading reply: server closed the connection"},
		{[]string{okInit, "cmd=maxes\n", "cmd=my_kvsname rc=0\n"}, "get_my_kvsname: reply has no kvsname"},
	} {
		_, err := NewClient(fakeServer(t, tc.replies...), 0, 1)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("replies %q: error %v, want it to contain %q", tc.replies, err, tc.want)
		}
	}
	// Hydra-style replies with extra keys and no rc are accepted; a bad
	// reply later makes the client unusable.
	c, err := NewClient(fakeServer(t, okInit,
		"cmd=maxes kvsname_max=256 keylen_max=32 vallen_max=100 extra=1\n",
		"cmd=my_kvsname kvsname=kvs_1_0 rc=0\n",
		"cmd=get_result rc=0 msg=success value=v extra=x\n",
		"cmd=bogus\n"), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Put(strings.Repeat("k", 33), "v"); err == nil {
		t.Error("client ignored the server's smaller keylen_max")
	}
	if v, err := c.Get("k"); err != nil || v != "v" {
		t.Errorf("get = %q, %v", v, err)
	}
	if _, err := c.Get("k"); err == nil || !strings.Contains(err.Error(), "expected cmd=get_result") {
		t.Errorf("bogus reply: %v", err)
	}
	if err := c.Barrier(); err == nil || !strings.Contains(err.Error(), "unusable") {
		t.Errorf("after protocol error: %v", err)
	}
}

func TestParseLine(t *testing.T) {
	m, err := parseLine("cmd=get_result rc=0 msg=success value=a=b\n")
	if err != nil || m.cmd != "get_result" || m.vals["value"] != "a=b" || m.vals["msg"] != "success" {
		t.Errorf("parse: %+v %v", m, err)
	}
	for _, bad := range []string{"", "\n", "cmd", "cmd=", "rc=0", "cmd=x =y", "cmd=x y"} {
		if _, err := parseLine(bad); err == nil {
			t.Errorf("parseLine(%q) succeeded", bad)
		}
	}
}

func TestEscapeText(t *testing.T) {
	for _, s := range []string{"", "plain", "a b\nc=d%e\t\x00\x7f", "100%", "%zz", "ünïcode ok"} {
		e := escapeText(s)
		if strings.ContainsAny(e, " \n\t=") {
			t.Errorf("escapeText(%q) = %q", s, e)
		}
		if got := unescapeText(e); got != s {
			t.Errorf("round trip %q -> %q -> %q", s, e, got)
		}
	}
	if got := unescapeText("bad%zzend%4"); got != "bad%zzend%4" {
		t.Errorf("malformed escapes: %q", got)
	}
}
