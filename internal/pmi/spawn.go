package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Dynamic processes in PMI-1: spawn, the universe size and the name
// service.
//
// A spawn is one block of lines per command, each "key=value" with the
// value running to the end of the line (so arguments may hold spaces):
//
//	mcmd=spawn
//	nprocs=N  execname=PATH  totspawns=T  spawnssofar=K
//	argcnt=A  arg1=...  argA=...
//	preput_num=P  preput_key_0=...  preput_val_0=...
//	info_num=I  info_key_0=...  info_val_0=...
//	endcmd
//
// (one pair per line). The server answers once, after block T of T, with
// "cmd=spawn_result rc=0", or rc=-1, a msg, and errcodes=c0,c1,... (one
// per process in command order: 0 started, 1 not started).

// PreputParentPort is the key under which a spawning process passes its
// port to the children's key-value space (the name MPICH uses, so that a
// launcher that knows the convention serves both).
const PreputParentPort = "PARENT_ROOT_PORT_NAME"

// EnvSpawned is set to 1 in the environment of spawned processes.
const EnvSpawned = "PMI_SPAWNED"

// SpawnCmd is one command of a spawn: MaxProcs processes of Command with
// Args, and hints (wdir, path, host, ...).
type SpawnCmd struct {
	Command  string
	Args     []string
	MaxProcs int
	Info     [][2]string
}

// SpawnError is the error of a spawn the launcher refused: its reason and
// which processes did not start (true), in command order.
type SpawnError struct {
	Msg     string
	Failed  []bool
	Refused bool // the launcher does not spawn at all
	Timeout bool // the launcher did not answer in time
}

func (e *SpawnError) Error() string { return e.Msg }

// Spawn asks the launcher to start cmds as one new job whose key-value
// space holds preput, and waits for its answer.
func (c *Client) Spawn(cmds []SpawnCmd, preput [][2]string) error {
	return c.SpawnWithin(cmds, preput, 0)
}

// SpawnWithin is Spawn waiting at most d for the launcher's answer (0: no
// bound). A launcher that has not answered by then fails the spawn, and
// the connection to it is unusable from then on (a late answer would be
// read as the answer to the next command): later calls of this client
// fail.
func (c *Client) SpawnWithin(cmds []SpawnCmd, preput [][2]string, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable("spawn"); err != nil {
		return err
	}
	if c.singleton {
		return &SpawnError{Msg: "no launcher to start processes (this process runs as a singleton)", Refused: true}
	}
	if dl, ok := c.conn.(interface{ SetReadDeadline(time.Time) error }); ok && d > 0 {
		if err := dl.SetReadDeadline(time.Now().Add(d)); err == nil {
			defer dl.SetReadDeadline(time.Time{})
		}
	}
	err := c.spawn1or2(cmds, preput)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		se := &SpawnError{Msg: fmt.Sprintf("the launcher did not answer the spawn within %v (its PMI connection is unusable from now on)", d), Timeout: true}
		for _, cmd := range cmds {
			for i := 0; i < cmd.MaxProcs; i++ {
				se.Failed = append(se.Failed, true)
			}
		}
		return se
	}
	return err
}

func (c *Client) spawn1or2(cmds []SpawnCmd, preput [][2]string) error {
	if c.v2 != nil {
		return c.spawn2(cmds, preput)
	}
	var b strings.Builder
	for k, cmd := range cmds {
		line := func(key, val string) {
			b.WriteString(key)
			b.WriteByte('=')
			b.WriteString(val)
			b.WriteByte('\n')
		}
		for _, s := range append([]string{cmd.Command}, cmd.Args...) {
			if strings.ContainsAny(s, "\n") {
				return fmt.Errorf("pmi: spawn: argument %q holds a newline", s)
			}
		}
		line("mcmd", "spawn")
		line("nprocs", strconv.Itoa(cmd.MaxProcs))
		line("execname", cmd.Command)
		line("totspawns", strconv.Itoa(len(cmds)))
		line("spawnssofar", strconv.Itoa(k+1))
		line("argcnt", strconv.Itoa(len(cmd.Args)))
		for i, a := range cmd.Args {
			line("arg"+strconv.Itoa(i+1), a)
		}
		line("preput_num", strconv.Itoa(len(preput)))
		for i, kv := range preput {
			line("preput_key_"+strconv.Itoa(i), kv[0])
			line("preput_val_"+strconv.Itoa(i), kv[1])
		}
		line("info_num", strconv.Itoa(len(cmd.Info)))
		for i, kv := range cmd.Info {
			line("info_key_"+strconv.Itoa(i), kv[0])
			line("info_val_"+strconv.Itoa(i), kv[1])
		}
		b.WriteString("endcmd\n")
	}
	if err := c.send(b.String()); err != nil {
		return c.broken(fmt.Errorf("pmi: spawn: %w", err))
	}
	m, err := c.recv("spawn", "spawn_result")
	if err != nil {
		return err
	}
	if rc, err := m.rc(); err != nil {
		return c.broken(err)
	} else if rc == 0 {
		return nil
	}
	se := &SpawnError{Msg: unescapeText(m.vals["msg"])}
	if se.Msg == "" {
		se.Msg = "the launcher could not start the processes"
	}
	if v, ok := m.get("errcodes"); ok {
		for _, f := range strings.Split(v, ",") {
			se.Failed = append(se.Failed, f != "0")
		}
	} else {
		se.Refused = true
	}
	return se
}

// spawn2 is Spawn under PMI-2: one frame holding every command,
//
//	cmd=spawn;ncmds=C;preputcount=P;ppkey0=K;ppval0=V;...;
//	subcmd=PATH;maxprocs=N;argc=A;argv0=...;infokeycount=I;infokey0=...;infoval0=...;...
//
// answered by cmd=spawn-response with rc (and, from some launchers,
// errcodes=c0,c1,...). Slurm's pmi2 plugin starts the children with a
// new srun and puts the preput pairs in their key-value space.
func (c *Client) spawn2(cmds []SpawnCmd, preput [][2]string) error {
	kv := []string{"ncmds", strconv.Itoa(len(cmds)), "preputcount", strconv.Itoa(len(preput))}
	for i, p := range preput {
		kv = append(kv, "ppkey"+strconv.Itoa(i), p[0], "ppval"+strconv.Itoa(i), p[1])
	}
	total := 0
	for _, cmd := range cmds {
		total += cmd.MaxProcs
		kv = append(kv, "subcmd", cmd.Command, "maxprocs", strconv.Itoa(cmd.MaxProcs), "argc", strconv.Itoa(len(cmd.Args)))
		for i, a := range cmd.Args {
			kv = append(kv, "argv"+strconv.Itoa(i), a)
		}
		kv = append(kv, "infokeycount", strconv.Itoa(len(cmd.Info)))
		for i, in := range cmd.Info {
			kv = append(kv, "infokey"+strconv.Itoa(i), in[0], "infoval"+strconv.Itoa(i), in[1])
		}
	}
	for i := 1; i < len(kv); i += 2 {
		if strings.ContainsAny(kv[i], ";\n") {
			return &SpawnError{Msg: fmt.Sprintf("pmi: spawn: %q holds ';' or a newline, which PMI-2 cannot carry", kv[i]), Refused: true}
		}
	}
	m, err := c.call2("spawn", kv...)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	if err != nil {
		se := &SpawnError{Msg: err.Error()}
		for i := 0; i < total; i++ {
			se.Failed = append(se.Failed, true)
		}
		return se
	}
	if v, ok := m.get("errcodes"); ok && v != "" {
		se := &SpawnError{Msg: "the launcher could not start every process"}
		bad := false
		for _, f := range strings.Split(v, ",") {
			se.Failed = append(se.Failed, f != "0")
			bad = bad || f != "0"
		}
		if bad {
			return se
		}
	}
	return nil
}

// Spawned reports whether this process was started by a spawn: PMI-1's
// launchers say so in EnvSpawned, PMI-2's in fullinit's spawner-jobid.
func (c *Client) Spawned() bool {
	if c.v2 != nil && c.v2.spawner != "" {
		return true
	}
	return os.Getenv(EnvSpawned) == "1"
}

// UniverseSize asks the launcher how many processes the job may usefully
// have, spawned ones included (1 for a singleton; under PMI-2 the
// launcher's universeSize attribute, else the job's size).
func (c *Client) UniverseSize() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable("get_universe_size"); err != nil {
		return 0, err
	}
	if c.singleton {
		return 1, nil
	}
	if c.v2 != nil { // PMI-2: the launcher's universeSize attribute, else the job's size
		if c.v2.universe > 0 {
			return c.v2.universe, nil
		}
		return c.size, nil
	}
	m, err := c.call("get_universe_size", "universe_size")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(m.vals["size"])
}

// ErrNoName is wrapped by LookupName's error when the service is not
// published, and by UnpublishName's when it is not published.
var ErrNoName = errors.New("service not published")

// PublishName publishes port under service in the launcher's name service.
func (c *Client) PublishName(service, port string) error {
	return c.nameCall("publish_name", "publish_result", "service", service, "port", port)
}

// UnpublishName withdraws service from the launcher's name service.
func (c *Client) UnpublishName(service string) error {
	return c.nameCall("unpublish_name", "unpublish_result", "service", service)
}

// LookupName finds the port published under service.
func (c *Client) LookupName(service string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable("lookup_name"); err != nil {
		return "", err
	}
	if c.singleton {
		return "", fmt.Errorf("pmi: lookup_name %s: %w (no launcher)", service, ErrNoName)
	}
	if err := c.send(formatLine("lookup_name", "service", service)); err != nil {
		return "", c.broken(err)
	}
	m, err := c.recv("lookup_name", "lookup_result")
	if err != nil {
		return "", err
	}
	if rc, _ := m.rc(); rc != 0 {
		return "", fmt.Errorf("pmi: lookup_name %s: %w", service, ErrNoName)
	}
	return m.vals["port"], nil
}

func (c *Client) nameCall(cmd, expect string, kv ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(cmd); err != nil {
		return err
	}
	for i := 1; i < len(kv); i += 2 {
		if err := checkToken(kv[i-1], kv[i], MaxValueLen, false); err != nil {
			return fmt.Errorf("pmi: %s: %w", cmd, err)
		}
	}
	if c.singleton {
		return fmt.Errorf("pmi: %s: no launcher keeps names for a singleton", cmd)
	}
	if err := c.send(formatLine(cmd, kv...)); err != nil {
		return c.broken(err)
	}
	m, err := c.recv(cmd, expect)
	if err != nil {
		return err
	}
	if rc, _ := m.rc(); rc != 0 {
		return fmt.Errorf("pmi: %s: %w: %s", cmd, ErrNoName, unescapeText(m.vals["msg"]))
	}
	return nil
}

// SpawnRequest is what a rank asked a server to spawn.
type SpawnRequest struct {
	Rank   int // the asking rank, in its job
	Cmds   []SpawnCmd
	Preput [][2]string
}

// Spawner starts the processes of a request as a new job and reports, per
// process in command order, whether it failed to start (nil error: all
// started).
type Spawner func(req SpawnRequest) (failed []bool, err error)

// Names is a launcher's name service, which the servers of its jobs share.
type Names struct {
	mu sync.Mutex
	m  map[string]string
}

// dynamic is a server's state for spawn and the name service.
type dynamic struct {
	mu       sync.Mutex
	spawner  Spawner
	universe int
	names    *Names
	partial  map[int][]SpawnCmd // blocks of a spawn received so far, by rank
	preput   map[int][][2]string
}

func (s *Server) dyn() *dynamic {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dynamic == nil {
		s.dynamic = &dynamic{names: &Names{m: map[string]string{}}, partial: map[int][]SpawnCmd{}, preput: map[int][][2]string{}}
	}
	return s.dynamic
}

// SetSpawner makes the server serve spawn requests with f.
func (s *Server) SetSpawner(f Spawner) { d := s.dyn(); d.mu.Lock(); d.spawner = f; d.mu.Unlock() }

// SetUniverseSize sets what get_universe_size answers (default: the job's size).
func (s *Server) SetUniverseSize(n int) { d := s.dyn(); d.mu.Lock(); d.universe = n; d.mu.Unlock() }

// ShareNames makes s use the same name service as other.
func (s *Server) ShareNames(other *Server) {
	n := other.dyn().names
	d := s.dyn()
	d.mu.Lock()
	d.names = n
	d.mu.Unlock()
}

// Put stores a key in the job's key-value space as if a rank had put it
// (a spawn's preput keys).
func (s *Server) Put(key, value string) {
	s.mu.Lock()
	s.kvs[key] = value
	s.mu.Unlock()
}

func (s *Server) universeSize() int {
	d := s.dyn()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.universe > 0 {
		return d.universe
	}
	return s.size
}

// mcmd reads the rest of a multi-line command that began with first and
// answers it (spawn is the only one).
func (s *Server) mcmd(rank int, first string, r *bufio.Reader, conn io.Writer) error {
	if strings.TrimSpace(first) != "mcmd=spawn" {
		return fmt.Errorf("pmi: rank %d: unknown multi-line command %q", rank, truncate(first, 100))
	}
	kv := map[string]string{}
	for {
		line, err := readLine(r)
		if err != nil {
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "endcmd" {
			break
		}
		k, v, _ := strings.Cut(line, "=")
		kv[k] = v
	}
	num := func(k string) int { n, _ := strconv.Atoi(kv[k]); return n }
	cmd := SpawnCmd{Command: kv["execname"], MaxProcs: num("nprocs")}
	for i := 1; i <= num("argcnt"); i++ {
		cmd.Args = append(cmd.Args, kv["arg"+strconv.Itoa(i)])
	}
	for i := 0; i < num("info_num"); i++ {
		cmd.Info = append(cmd.Info, [2]string{kv["info_key_"+strconv.Itoa(i)], kv["info_val_"+strconv.Itoa(i)]})
	}
	d := s.dyn()
	d.mu.Lock()
	d.partial[rank] = append(d.partial[rank], cmd)
	if num("spawnssofar") == 1 {
		d.partial[rank] = []SpawnCmd{cmd}
		d.preput[rank] = nil
		for i := 0; i < num("preput_num"); i++ {
			d.preput[rank] = append(d.preput[rank], [2]string{kv["preput_key_"+strconv.Itoa(i)], kv["preput_val_"+strconv.Itoa(i)]})
		}
	}
	if num("spawnssofar") < num("totspawns") {
		d.mu.Unlock()
		return nil // more blocks follow; one answer at the end
	}
	req := SpawnRequest{Rank: rank, Cmds: d.partial[rank], Preput: d.preput[rank]}
	delete(d.partial, rank)
	delete(d.preput, rank)
	spawner := d.spawner
	d.mu.Unlock()
	var line string
	if spawner == nil {
		line = formatLine("spawn_result", "rc", "-1", "msg", escapeText("this launcher does not spawn processes"))
	} else if failed, err := spawner(req); err != nil {
		codes := make([]string, len(failed))
		for i, f := range failed {
			codes[i] = "0"
			if f {
				codes[i] = "1"
			}
		}
		line = formatLine("spawn_result", "rc", "-1", "msg", escapeText(err.Error()), "errcodes", strings.Join(codes, ","))
	} else {
		line = formatLine("spawn_result", "rc", "0")
	}
	_, err := io.WriteString(conn, line)
	return err
}

// nameCmd serves the name service's commands; it reports false for any
// other command.
func (s *Server) nameCmd(m message, reply func(string, ...string) error) (bool, error) {
	n := s.dyn().names
	n.mu.Lock()
	defer n.mu.Unlock()
	service := m.vals["service"]
	switch m.cmd {
	case "publish_name":
		if _, dup := n.m[service]; dup {
			return true, reply("publish_result", "rc", "-1", "msg", escapeText("service "+service+" is already published"))
		}
		n.m[service] = m.vals["port"]
		return true, reply("publish_result", "rc", "0")
	case "unpublish_name":
		if _, ok := n.m[service]; !ok {
			return true, reply("unpublish_result", "rc", "-1", "msg", escapeText("service "+service+" is not published"))
		}
		delete(n.m, service)
		return true, reply("unpublish_result", "rc", "0")
	case "lookup_name":
		port, ok := n.m[service]
		if !ok {
			return true, reply("lookup_result", "rc", "-1", "msg", escapeText("service "+service+" is not published"))
		}
		return true, reply("lookup_result", "rc", "0", "port", port)
	}
	return false, nil
}
