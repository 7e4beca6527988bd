package mpi

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Bounding a spawn. Some launchers (mpiexec.hydra serving PMI-1, Slurm's
// pmi2 plugin) answer a spawn before they run the program, so a program
// that cannot run would leave the parents waiting for ever for children
// that never connect. The root therefore checks what it can before
// asking (a command meant for its own host must resolve there) and waits
// for the children's root only until a deadline.

// EnvSpawnTimeout, when set, is how long a spawn waits for its children to
// connect unless the spawn's Info "timeout" says otherwise: seconds
// ("45", "2.5") or a Go duration ("90s", "2m").
const EnvSpawnTimeout = "ADIMPI_SPAWN_TIMEOUT"

// DefaultSpawnTimeout is how long a spawn waits for its children to
// connect when neither Info "timeout" nor EnvSpawnTimeout is set.
const DefaultSpawnTimeout = 60 * time.Second

// infoTimeout is the Info key of a spawn's bound (EnvSpawnTimeout's format).
const infoTimeout = "timeout"

// spawnHint ends the message of a spawn whose children never connected.
const spawnHint = "the launcher accepted the spawn but no child reached MPI_Init: " +
	"is the program there and executable on that host (see the launcher's output)?"

// parseSpawnTimeout reads a bound in seconds or as a Go duration.
func parseSpawnTimeout(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f <= 0 {
			return 0, fmt.Errorf("%q is not a positive number of seconds", s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is neither seconds nor a positive duration like 90s", s)
	}
	return d, nil
}

// spawnTimeout is the spawn's bound: the largest Info "timeout" of its
// commands, else EnvSpawnTimeout, else DefaultSpawnTimeout.
func spawnTimeout(op string, cmds []SpawnCommand) (time.Duration, error) {
	var best time.Duration
	for i, c := range cmds {
		if c.Info == nil {
			continue
		}
		v, ok, _ := c.Info.Get(infoTimeout)
		if !ok {
			continue
		}
		d, err := parseSpawnTimeout(v)
		if err != nil {
			return 0, errorf(ErrArg, op, "command %d: Info %q: %v", i, infoTimeout, err)
		}
		best = max(best, d)
	}
	if best > 0 {
		return best, nil
	}
	if v := os.Getenv(EnvSpawnTimeout); v != "" {
		d, err := parseSpawnTimeout(v)
		if err != nil {
			return 0, errorf(ErrArg, op, "%s: %v", EnvSpawnTimeout, err)
		}
		return d, nil
	}
	return DefaultSpawnTimeout, nil
}

// infoValue is key's value in info, or "".
func infoValue(info *Info, key string) string {
	if info == nil {
		return ""
	}
	v, _, _ := info.Get(key)
	return v
}

// spawnHost names where command c's children go: Info "host", or this host
// with the launcher's choice noted.
func spawnHost(c SpawnCommand) string {
	if h := infoValue(c.Info, "host"); h != "" {
		return h
	}
	me, _ := os.Hostname()
	return "the launcher's choice (this host is " + me + ")"
}

// describeCommands names the commands of a spawn, their sizes and hosts.
func describeCommands(cmds []SpawnCommand) string {
	var parts []string
	for i, c := range cmds {
		parts = append(parts, fmt.Sprintf("command %d (%s, %d processes, host %s)", i, c.Command, c.MaxProcs, spawnHost(c)))
	}
	return strings.Join(parts, ", ")
}

// isThisHost reports whether a host name from Info "host" names the host
// this process runs on.
func isThisHost(h string) bool {
	if h == "localhost" || h == "127.0.0.1" || h == "::1" {
		return true
	}
	me, err := os.Hostname()
	if err != nil {
		return false
	}
	short, _, _ := strings.Cut(me, ".")
	return strings.EqualFold(h, me) || strings.EqualFold(h, short)
}

// checkLocalCommand checks, for a command whose Info "host" is this host,
// that its working directory exists and its program resolves to an
// executable file here, as the launcher would find it (Info "wdir" for a
// command with a '/', Info "path" then $PATH for one without). Commands
// meant for other hosts, or for wherever the launcher puts them, pass:
// only the wait's bound catches those.
func checkLocalCommand(i int, c SpawnCommand) error {
	host := infoValue(c.Info, "host")
	if host == "" || !isThisHost(host) {
		return nil
	}
	wdir := infoValue(c.Info, "wdir")
	if wdir != "" {
		if st, err := os.Stat(wdir); err != nil || !st.IsDir() {
			return fmt.Errorf("command %d (%s): Info \"wdir\" %q is not a directory on host %s", i, c.Command, wdir, host)
		}
	}
	isExec := func(p string) bool {
		st, err := os.Stat(p)
		return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
	}
	if strings.Contains(c.Command, "/") {
		p := c.Command
		if !filepath.IsAbs(p) && wdir != "" {
			p = filepath.Join(wdir, p)
		}
		if !isExec(p) {
			return fmt.Errorf("command %d (%s): no executable file %s on host %s", i, c.Command, p, host)
		}
		return nil
	}
	dirs := filepath.SplitList(infoValue(c.Info, "path"))
	dirs = append(dirs, filepath.SplitList(os.Getenv("PATH"))...)
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if !filepath.IsAbs(d) && wdir != "" {
			d = filepath.Join(wdir, d)
		}
		if isExec(filepath.Join(d, c.Command)) {
			return nil
		}
	}
	return fmt.Errorf("command %d (%s): not found on host %s in Info \"path\" or $PATH", i, c.Command, host)
}

// childRoot is the parents' root's connection to the children's root,
// whose half of the exchange has arrived.
type childRoot struct {
	conn  net.Conn
	other []byte
}

// answer is joinGroups' talk for a spawn: it sends the parents' half and
// returns the children's.
func (k *childRoot) answer(msg []byte) ([]byte, error) {
	if err := writeFramed(k.conn, msg); err != nil {
		return nil, errorf(ErrSpawn, "MPI_Comm_spawn", "answering the children's root: %v", err)
	}
	return k.other, nil
}

// close ends the connection (nil is fine: not the root, or no children).
func (k *childRoot) close() {
	if k != nil {
		k.conn.Close()
	}
}

// awaitChildRoot waits on the port until the children's root has
// connected and sent its half of the exchange, or until the deadline.
func awaitChildRoot(portName string, deadline time.Time) (*childRoot, error) {
	ports.Lock()
	p := ports.m[portName]
	ports.Unlock()
	if p == nil {
		return nil, fmt.Errorf("port %q is not open", portName)
	}
	ln, ok := p.ln.(*net.TCPListener)
	if !ok {
		return nil, fmt.Errorf("port %q is not a TCP listener", portName)
	}
	if err := ln.SetDeadline(deadline); err != nil {
		return nil, err
	}
	for {
		c, err := ln.Accept()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, errors.New("timed out")
		}
		if err != nil {
			return nil, err
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if f := strings.Fields(line); err != nil || len(f) != 2 || f[0] != portGreeting || f[1] != p.token {
			c.Close()
			continue
		}
		other, err := readFramed(br)
		if err != nil {
			c.Close()
			continue
		}
		_ = c.SetReadDeadline(time.Time{})
		return &childRoot{conn: c, other: other}, nil
	}
}
