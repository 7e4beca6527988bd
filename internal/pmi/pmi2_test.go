package pmi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/testnote"
)

// pmi2Server is a small PMI-2 server for the tests, answering as Slurm's
// mpi/pmi2 plugin does: a PMI-1 init line, then frames; a fence answers
// every rank once all have entered it; abort records its message.
type pmi2Server struct {
	size    int
	version string // what response_to_init says (default "2")
	attrs   map[string]string

	mu      sync.Mutex
	kvs     map[string]string
	pending map[string]string // puts not yet fenced
	fenced  []net.Conn
	abortc  chan string // isworld and msg of each abort
	log     []string    // every request body, in order of arrival
}

func newPMI2Server(size int) *pmi2Server {
	return &pmi2Server{size: size, version: "2", attrs: map[string]string{AttrUniverseSize: strconv.Itoa(size), AttrProcessMapping: "(vector,(0,1,2),(1,1,1))"},
		kvs: map[string]string{}, pending: map[string]string{}, abortc: make(chan string, 8)}
}

// client returns a client for rank r connected to the server.
func (s *pmi2Server) client(t *testing.T, r int) *Client {
	t.Helper()
	mine, theirs := net.Pipe()
	go s.serve(theirs, r)
	c, err := NewClient2(mine, r, "7.0")
	if err != nil {
		t.Fatalf("rank %d: %v", r, err)
	}
	return c
}

func (s *pmi2Server) serve(conn net.Conn, rank int) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	line, err := readLine(r)
	if err != nil {
		return
	}
	m, err := parseLine(line)
	if err != nil || m.cmd != "init" {
		return
	}
	fmt.Fprintf(conn, "cmd=response_to_init rc=0 pmi_version=%s pmi_subversion=0\n", s.version)
	reply := func(kv ...string) { conn.Write([]byte(formatFrame(kv[0], kv[1:]...))) }
	for {
		body, err := readFrame(r)
		if err != nil {
			return
		}
		m, err := parseFrame(body)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.log = append(s.log, body)
		s.mu.Unlock()
		switch m.cmd {
		case "fullinit":
			if m.vals["pmirank"] != strconv.Itoa(rank) || m.vals["pmijobid"] != "7.0" || m.vals["threaded"] == "" {
				reply("fullinit-response", "rc", "3")
				continue
			}
			reply("fullinit-response", "rc", "0", "pmi-version", "2", "pmi-subversion", "0", "rank", strconv.Itoa(rank),
				"size", strconv.Itoa(s.size), "appnum", "0", "debugged", "FALSE", "pmiverbose", "FALSE")
		case "info-getjobattr":
			if v, ok := s.attrs[m.vals["key"]]; ok {
				reply("info-getjobattr-response", "rc", "0", "found", "TRUE", "value", v)
			} else {
				reply("info-getjobattr-response", "rc", "0", "found", "FALSE")
			}
		case "kvs-put":
			s.mu.Lock()
			s.pending[m.vals["key"]] = m.vals["value"]
			s.mu.Unlock()
			reply("kvs-put-response", "rc", "0")
		case "kvs-fence":
			s.mu.Lock()
			s.fenced = append(s.fenced, conn)
			if len(s.fenced) == s.size {
				for k, v := range s.pending {
					s.kvs[k] = v
				}
				s.pending = map[string]string{}
				for _, c := range s.fenced {
					c.Write([]byte(formatFrame("kvs-fence-response", "rc", "0")))
				}
				s.fenced = nil
			}
			s.mu.Unlock()
		case "kvs-get":
			s.mu.Lock()
			v, ok := s.kvs[m.vals["key"]]
			s.mu.Unlock()
			if ok {
				reply("kvs-get-response", "rc", "0", "found", "TRUE", "value", v)
			} else {
				reply("kvs-get-response", "rc", "0", "found", "FALSE")
			}
		case "spawn":
			if m.vals["subcmd"] == "fail" {
				reply("spawn-response", "rc", "1", "errmsg", "spawn failed")
			} else {
				reply("spawn-response", "rc", "0", "jobid", "7.0-1", "nerrs", "0")
			}
		case "finalize":
			reply("finalize-response", "rc", "0")
			return
		case "abort":
			s.abortc <- m.vals["isworld"] + " " + m.vals["msg"]
			return
		default:
			reply(m.cmd+"-response", "rc", "14", "errmsg", "unknown command")
		}
	}
}

// pmi2Spawns checks PMI-2's spawn on rank 0's client c: the frame a spawn
// of two commands sends (preput, arguments with blanks, Info), a spawn the
// launcher refuses (every child failed), and that the connection goes on.
func pmi2Spawns(c *Client) error {
	if c.Spawned() {
		return errors.New("a client that fullinit did not call spawned says it was")
	}
	err := c.Spawn([]SpawnCmd{{Command: "/bin/prog", Args: []string{"a b", "c"}, MaxProcs: 2, Info: [][2]string{{"host", "h2"}, {"wdir", "/w"}}},
		{Command: "other", MaxProcs: 1}}, [][2]string{{PreputParentPort, "adimpi-port:t@198.18.0.1:5"}})
	if err != nil {
		return fmt.Errorf("spawn under PMI-2: %v", err)
	}
	var se *SpawnError
	if err := c.Spawn([]SpawnCmd{{Command: "fail", MaxProcs: 3}}, nil); !errors.As(err, &se) || len(se.Failed) != 3 || !se.Failed[2] ||
		!strings.Contains(se.Msg, "spawn failed") {
		return fmt.Errorf("a refused spawn under PMI-2: %v, want a SpawnError for 3 failed children saying why", err)
	}
	return nil
}

// wantSpawnFrame is the frame of pmi2Spawns' first spawn.
const wantSpawnFrame = "cmd=spawn;ncmds=2;preputcount=1;ppkey0=PARENT_ROOT_PORT_NAME;ppval0=adimpi-port:t@198.18.0.1:5;" +
	"subcmd=/bin/prog;maxprocs=2;argc=2;argv0=a b;argv1=c;infokeycount=2;infokey0=host;infoval0=h2;infokey1=wdir;infoval1=/w;" +
	"subcmd=other;maxprocs=1;argc=0;infokeycount=0;"

// Three ranks exchange values through put, fence and get, learn the job's
// attributes, and finalize; a missing key is ErrKeyNotFound.
func TestPMI2Exchange(t *testing.T) {
	const n = 3
	s := newPMI2Server(n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = func() error {
				c := s.client(t, r)
				if c.Rank() != r || c.Size() != n || c.Version() != 2 || c.AppNum() != 0 || universe(c) != n {
					return fmt.Errorf("rank %d: got rank %d size %d version %d appnum %d universe %d", r, c.Rank(), c.Size(), c.Version(), c.AppNum(), universe(c))
				}
				if err := c.Put("k"+strconv.Itoa(r), "v=alue-"+strconv.Itoa(r*10)); err == nil {
					return errors.New("a value with '=' was accepted")
				}
				if err := c.Put("k"+strconv.Itoa(r), "value-"+strconv.Itoa(r*10)); err != nil {
					return err
				}
				if r == 0 {
					if err := pmi2Spawns(c); err != nil {
						return err
					}
				}
				if err := c.Barrier(); err != nil {
					return err
				}
				for p := 0; p < n; p++ {
					v, err := c.Get("k" + strconv.Itoa(p))
					if err != nil {
						return err
					}
					if want := "value-" + strconv.Itoa(p*10); v != want {
						return fmt.Errorf("rank %d: get k%d = %q, want %q", r, p, v, want)
					}
				}
				if _, err := c.Get("nokey"); !errors.Is(err, ErrKeyNotFound) {
					return fmt.Errorf("get of a missing key: %v, want ErrKeyNotFound", err)
				}
				if v, ok, err := c.JobAttr(AttrProcessMapping); err != nil || !ok || v != "(vector,(0,1,2),(1,1,1))" {
					return fmt.Errorf("job attribute %s: %q %v %v", AttrProcessMapping, v, ok, err)
				}
				if _, ok, err := c.JobAttr("noattr"); ok || err != nil {
					return fmt.Errorf("missing job attribute: found %v, err %v", ok, err)
				}
				return c.Finalize()
			}()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if !strings.HasPrefix(s.log[0], "cmd=fullinit;") {
		t.Errorf("first request %q, want fullinit", s.log[0])
	}
	if !slices.Contains(s.log, wantSpawnFrame) {
		t.Errorf("no spawn request %q among\n%s", wantSpawnFrame, strings.Join(s.log, "\n"))
	}
}

// Abort sends isworld and the message, with the ';' that Slurm cannot read
// replaced; a value with ';' is refused before it is sent.
func TestPMI2AbortAndSemicolons(t *testing.T) {
	s := newPMI2Server(1)
	c := s.client(t, 0)
	if err := c.Put("key", "a;b"); err == nil || !strings.Contains(err.Error(), "';'") {
		t.Errorf("put of a value with ';': %v, want a refusal naming ';'", err)
	}
	if err := c.Abort(3, "MPI_Abort(MPI_COMM_WORLD, 3); rank 0"); err != nil {
		t.Fatal(err)
	}
	if got := <-s.abortc; got != "TRUE MPI_Abort(MPI_COMM_WORLD, 3), rank 0" {
		t.Errorf("abort received as %q", got)
	}
}

// A launcher that answers init with another version is refused with a
// message that says how to use PMI-1 instead.
func TestPMI2VersionRefused(t *testing.T) {
	s := newPMI2Server(1)
	s.version = "1"
	mine, theirs := net.Pipe()
	go s.serve(theirs, 0)
	_, err := NewClient2(mine, 0, "7.0")
	if err == nil || !strings.Contains(err.Error(), EnvVersion+"=1") {
		t.Fatalf("got %v, want a refusal naming %s=1", err, EnvVersion)
	}
}

// Frames round-trip, with ";;" for a ';' in a value, and a bad length is
// an error.
func TestPMI2Frames(t *testing.T) {
	f := formatFrame("kvs-put", "key", "k", "value", "a;b")
	if f != "29    cmd=kvs-put;key=k;value=a;;b;" {
		t.Errorf("frame %q", f)
	}
	body, err := readFrame(bufio.NewReader(strings.NewReader(f)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseFrame(body)
	if err != nil || m.cmd != "kvs-put" || m.vals["value"] != "a;b" || m.vals["key"] != "k" {
		t.Errorf("parsed %+v, %v", m, err)
	}
	if _, err := readFrame(bufio.NewReader(strings.NewReader("xx    cmd=a;"))); err == nil {
		t.Error("a bad length field was accepted")
	}
	if _, err := parseFrame("key=v;cmd=a;"); err == nil {
		t.Error("a message not starting with cmd was accepted")
	}
}

// Connect chooses PMI-2 on PMI_FD when PMI_JOBID is set, and PMI-1 when
// ADIMPI_PMI_VERSION=1 says so.
func TestConnectChoosesPMI2(t *testing.T) {
	for i, tc := range []struct {
		env  []string
		want int
	}{
		{[]string{EnvJobID, "7.0"}, 2},
		{[]string{EnvJobID, "7.0", EnvVersion, "1"}, 1},
		{[]string{EnvVersion, "2", EnvJobID, "7.0"}, 2},
	} {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		srvConn, err := net.FileConn(os.NewFile(uintptr(fds[1]), "server"))
		if err != nil {
			t.Fatal(err)
		}
		syscall.Close(fds[1])
		// Connect takes a descriptor number once per process: each case
		// gets a number of its own.
		fd := 300 + i
		if err := syscall.Dup3(fds[0], fd, 0); err != nil {
			t.Fatal(err)
		}
		syscall.Close(fds[0])
		t.Setenv(EnvFD, strconv.Itoa(fd))
		t.Setenv(EnvRank, "0")
		t.Setenv(EnvSize, "1")
		t.Setenv(EnvJobID, "")
		t.Setenv(EnvVersion, "")
		for i := 0; i+1 < len(tc.env); i += 2 {
			t.Setenv(tc.env[i], tc.env[i+1])
		}
		if tc.want == 2 {
			go newPMI2Server(1).serve(srvConn, 0)
		} else {
			srv := NewServer(1, "kvs")
			go srv.Serve(0, srvConn)
		}
		c, err := Connect()
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		if c.Version() != tc.want {
			t.Errorf("%v: version %d, want %d", tc.env, c.Version(), tc.want)
		}
		if err := c.Finalize(); err != nil {
			t.Errorf("%v: finalize: %v", tc.env, err)
		}
		srvConn.Close()
	}
}

// The PMI-2 client also speaks to MPICH's Hydra, which serves both
// versions on PMI_FD, when ADIMPI_PMI_VERSION=2 asks for it (Hydra sets no
// PMI_JOBID, so PMI-1 is its default).
func TestPMI2Hydra(t *testing.T) {
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		testnote.Skip(t, "internal/pmi: mpiexec.hydra is not on PATH: install the Debian package mpich (apt-get install -y mpich) to run this test")
	}
	bin := filepath.Join(t.TempDir(), "hydraprobe")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/hydraprobe").CombinedOutput(); err != nil {
		t.Fatalf("building hydraprobe: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, hydra, "-n", "3", bin)
	cmd.Env = append(filterEnv(os.Environ(), EnvFD, EnvPort, EnvID, EnvRank, EnvSize, EnvJobID), EnvVersion+"=2", EnvDebug+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mpiexec.hydra -n 3 hydraprobe: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	sort.Strings(lines)
	for r, l := range lines {
		want := fmt.Sprintf("hydraprobe rank=%d size=3 singleton=false kvsname_set=true missing_key_error=true values=v0:x,v1:xx,v2:xxx", r)
		if l != want {
			t.Errorf("line %q, want %q", l, want)
		}
	}
	if len(lines) != 3 || !strings.Contains(stderr.String(), "cmd=fullinit;") || !strings.Contains(stderr.String(), "cmd=kvs-fence-response;") {
		t.Errorf("want 3 ranks speaking PMI-2; stdout:\n%s\nstderr:\n%s", out, stderr.String())
	}
}

// universe is c.UniverseSize with its error folded into -1.
func universe(c *Client) int {
	n, err := c.UniverseSize()
	if err != nil {
		return -1
	}
	return n
}
