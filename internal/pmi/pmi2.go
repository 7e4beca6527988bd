package pmi

// The PMI-2 wire protocol, as Slurm's mpi/pmi2 plugin (srun --mpi=pmi2) and
// MPICH's Hydra serve it on the inherited PMI_FD socket. The connection
// opens with one PMI-1 line, "cmd=init pmi_version=2 pmi_subversion=0",
// answered by a PMI-1 "cmd=response_to_init" line; from then on every
// message is a frame: its body's length as a six-character decimal field
// (left-aligned, padded with spaces) followed by the body, a sequence of
// "key=value;" pairs whose first key is cmd:
//
//	cmd=fullinit;pmijobid=J;pmirank=R;threaded=FALSE;  -> cmd=fullinit-response;rc=0;rank=R;size=N;appnum=A;...
//	cmd=info-getjobattr;key=K;                          -> cmd=info-getjobattr-response;rc=0;found=TRUE;value=V;
//	cmd=kvs-put;key=K;value=V;                          -> cmd=kvs-put-response;rc=0;
//	cmd=kvs-fence;                                      -> cmd=kvs-fence-response;rc=0;
//	cmd=kvs-get;jobid=J;srcid=-1;key=K;                 -> cmd=kvs-get-response;rc=0;found=TRUE;value=V;
//	cmd=finalize;                                       -> cmd=finalize-response;rc=0;
//	cmd=abort;isworld=TRUE;msg=M;                       (no reply: the launcher kills the job)
//
// The protocol escapes a ';' inside a value by doubling it, but Slurm's
// server does not understand the escape, so keys and values with ';' are
// refused here rather than sent.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Environment variables that choose and configure PMI-2.
const (
	// EnvJobID is the PMI-2 job id that Slurm's pmi2 plugin gives every
	// task beside PMI_FD; its presence is what selects PMI-2.
	EnvJobID = "PMI_JOBID"
	// EnvVersion, when "1" or "2", overrides the choice of PMI version on
	// a PMI_FD connection (default: 2 when EnvJobID is set, else 1).
	EnvVersion = "ADIMPI_PMI_VERSION"
)

// Job attributes of PMI-2 (info-getjobattr keys).
const (
	// AttrProcessMapping describes which ranks share a node, in the
	// "(vector,(node,nodes,ranks),...)" form that Slurm computes from its
	// task layout.
	AttrProcessMapping = "PMI_process_mapping"
	// AttrUniverseSize is the number of processes the job may grow to.
	AttrUniverseSize = "universeSize"
)

// pmi2LenField is the width of a PMI-2 frame's length field.
const pmi2LenField = 6

// pmi2State is what a PMI-2 connection adds to a Client.
type pmi2State struct {
	jobid    string
	appnum   int
	universe int    // 0: the server did not say
	spawner  string // the spawning job's id (fullinit's spawner-jobid), "" if not spawned
}

// usePMI2 reports whether a PMI_FD connection should speak PMI-2.
func usePMI2() (bool, error) {
	switch v := os.Getenv(EnvVersion); v {
	case "":
		return os.Getenv(EnvJobID) != "", nil
	case "1":
		return false, nil
	case "2":
		return true, nil
	default:
		return false, fmt.Errorf("pmi: connect: bad %s=%q: want 1 or 2", EnvVersion, v)
	}
}

// NewClient2 performs the PMI-2 handshake (init, fullinit, and the
// universe-size job attribute) over conn for the process with the given
// rank, whose launcher named its job jobid. The server's rank and size are
// the client's; rank is checked against them. The client owns conn from
// then on.
func NewClient2(conn io.ReadWriteCloser, rank int, jobid string) (*Client, error) {
	return newClient2(conn, rank, jobid, false)
}

func newClient2(conn io.ReadWriteCloser, rank int, jobid string, debug bool) (*Client, error) {
	c := &Client{conn: conn, r: bufio.NewReader(conn), rank: rank, size: -1, debug: debug,
		keyMax: MaxKeyLen, valMax: MaxValueLen, v2: &pmi2State{jobid: jobid, appnum: -1}}
	fail := func(err error) (*Client, error) {
		conn.Close()
		return nil, err
	}
	// The version is chosen with one PMI-1 exchange.
	m, err := c.call("init", "response_to_init", "pmi_version", "2", "pmi_subversion", "0")
	if err != nil {
		return fail(fmt.Errorf("%w (the launcher may not serve PMI-2: %s=1 makes adimpi use PMI-1)", err, EnvVersion))
	}
	if v, _ := m.get("pmi_version"); v != "2" {
		return fail(fmt.Errorf("pmi: init: asked for PMI version 2, the launcher answered version %q (%s=1 makes adimpi use PMI-1)", v, EnvVersion))
	}
	kv := []string{}
	if jobid != "" {
		kv = append(kv, "pmijobid", jobid)
	}
	kv = append(kv, "pmirank", strconv.Itoa(rank), "threaded", "FALSE")
	r, err := c.call2("fullinit", kv...)
	if err != nil {
		return fail(err)
	}
	gotRank, err1 := strconv.Atoi(r.vals["rank"])
	size, err2 := strconv.Atoi(r.vals["size"])
	if err1 != nil || err2 != nil || size < 1 || gotRank < 0 || gotRank >= size {
		return fail(fmt.Errorf("pmi: fullinit: the launcher gave rank %q of size %q", r.vals["rank"], r.vals["size"]))
	}
	if rank >= 0 && gotRank != rank {
		return fail(fmt.Errorf("pmi: fullinit: the launcher says this is rank %d, %s says %d", gotRank, EnvRank, rank))
	}
	c.rank, c.size = gotRank, size
	if a, err := strconv.Atoi(r.vals["appnum"]); err == nil {
		c.v2.appnum = a
	}
	c.v2.spawner = r.vals["spawner-jobid"]
	c.kvsname = jobid
	if c.kvsname == "" {
		c.kvsname = "pmi2"
	}
	if v, ok, err := c.jobAttr2(AttrUniverseSize); err != nil {
		return fail(err)
	} else if ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			c.v2.universe = n
		}
	}
	return c, nil
}

// Version is the PMI version the client speaks: 1, or 2 on a PMI-2
// connection. A singleton says 1.
func (c *Client) Version() int {
	if c.v2 != nil {
		return 2
	}
	return 1
}

// AppNum is the index of this process's program on an MPMD command line as
// the PMI-2 launcher gave it in fullinit, or -1 when it gave none (Slurm
// gives none; PMI-1 has no appnum in its handshake).
func (c *Client) AppNum() int {
	if c.v2 == nil {
		return -1
	}
	return c.v2.appnum
}

// JobAttr returns the PMI-2 job attribute key (AttrProcessMapping, for
// one) and whether the launcher has it. Over PMI-1, which has no job
// attributes, it reports none.
func (c *Client) JobAttr(key string) (string, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable("info-getjobattr"); err != nil {
		return "", false, err
	}
	if c.v2 == nil {
		return "", false, nil
	}
	return c.jobAttr2(key)
}

func (c *Client) jobAttr2(key string) (string, bool, error) {
	if err := checkToken2("key", key, c.keyMax, false); err != nil {
		return "", false, fmt.Errorf("pmi: info-getjobattr: %w", err)
	}
	r, err := c.call2("info-getjobattr", "key", key)
	if err != nil {
		return "", false, err
	}
	if !strings.EqualFold(r.vals["found"], "TRUE") {
		return "", false, nil
	}
	return r.vals["value"], true, nil
}

// put2, fence2, get2, finalize2 and abort2 are Put, Barrier, Get, Finalize
// and Abort on a PMI-2 connection; the caller holds c.mu and has checked
// that the client is usable and the key and value are valid PMI-1 tokens.
func (c *Client) put2(key, value string) error {
	if strings.Contains(key+value, ";") {
		return fmt.Errorf("pmi: put %q: key or value contains ';', which the PMI-2 wire protocol of Slurm cannot carry", key)
	}
	_, err := c.call2("kvs-put", "key", key, "value", value)
	return err
}

func (c *Client) fence2() error {
	_, err := c.call2("kvs-fence")
	return err
}

func (c *Client) get2(key string) (string, error) {
	if strings.Contains(key, ";") {
		return "", fmt.Errorf("pmi: get %q: key contains ';', which the PMI-2 wire protocol of Slurm cannot carry", key)
	}
	r, err := c.call2("kvs-get", "jobid", c.v2.jobid, "srcid", "-1", "key", key)
	if err != nil {
		return "", err
	}
	if !strings.EqualFold(r.vals["found"], "TRUE") {
		return "", fmt.Errorf("pmi: get %q: %w", key, ErrKeyNotFound)
	}
	v, ok := r.vals["value"]
	if !ok {
		return "", c.broken(fmt.Errorf("pmi: get %q: reply has no value", key))
	}
	return v, nil
}

func (c *Client) finalize2() error {
	_, err := c.call2("finalize")
	return err
}

// abort2 prints msg on standard error, since a PMI-2 launcher (Slurm) does
// not print it, and asks the launcher to kill the whole job.
func (c *Client) abort2(code int, msg string) error {
	if msg == "" {
		msg = "no message"
	}
	fmt.Fprintf(os.Stderr, "adimpi: rank %d aborts the job (exit code %d): %s\n", c.rank, code, msg)
	msg = strings.NewReplacer(";", ",", "\n", " ").Replace(truncate(msg, MaxValueLen-4))
	if err := c.send2(formatFrame("abort", "isworld", "TRUE", "msg", msg)); err != nil {
		return c.broken(fmt.Errorf("pmi: abort: %w", err))
	}
	return nil
}

// call2 sends a PMI-2 command, reads the reply, and checks that it is
// cmd-response with rc 0.
func (c *Client) call2(cmd string, kv ...string) (message, error) {
	if err := c.send2(formatFrame(cmd, kv...)); err != nil {
		return message{}, c.broken(fmt.Errorf("pmi: %s: %w", cmd, err))
	}
	body, err := readFrame(c.r)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("the launcher closed the connection")
		}
		return message{}, c.broken(fmt.Errorf("pmi: %s: reading reply: %w", cmd, err))
	}
	if c.debug {
		fmt.Fprintf(os.Stderr, "pmi2[%d] <- %s\n", c.rank, body)
	}
	m, err := parseFrame(body)
	if err != nil {
		return message{}, c.broken(fmt.Errorf("pmi: %s: %w", cmd, err))
	}
	if m.cmd != cmd+"-response" {
		return message{}, c.broken(fmt.Errorf("pmi: %s: expected cmd=%s-response, got %q", cmd, cmd, truncate(body, 200)))
	}
	rc, err := m.rc()
	if err != nil {
		return message{}, c.broken(fmt.Errorf("pmi: %s: %w", cmd, err))
	}
	if rc != 0 {
		if msg, ok := m.get("errmsg"); ok {
			return message{}, fmt.Errorf("pmi: %s: the launcher returned rc=%d: %s", cmd, rc, msg)
		}
		return message{}, fmt.Errorf("pmi: %s: the launcher returned rc=%d", cmd, rc)
	}
	return m, nil
}

func (c *Client) send2(frame string) error {
	if c.debug {
		fmt.Fprintf(os.Stderr, "pmi2[%d] -> %s\n", c.rank, frame)
	}
	_, err := io.WriteString(c.conn, frame)
	return err
}

// formatFrame builds a PMI-2 frame: the length field, then
// "cmd=NAME;k1=v1;k2=v2;" from cmd and alternating keys and values.
func formatFrame(cmd string, kv ...string) string {
	var b strings.Builder
	b.WriteString("cmd=")
	b.WriteString(cmd)
	b.WriteByte(';')
	for i := 0; i+1 < len(kv); i += 2 {
		b.WriteString(kv[i])
		b.WriteByte('=')
		b.WriteString(strings.ReplaceAll(kv[i+1], ";", ";;"))
		b.WriteByte(';')
	}
	return fmt.Sprintf("%-*d", pmi2LenField, b.Len()) + b.String()
}

// readFrame reads one PMI-2 frame and returns its body.
func readFrame(r *bufio.Reader) (string, error) {
	var lenField [pmi2LenField]byte
	if _, err := io.ReadFull(r, lenField[:]); err != nil {
		return "", err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(lenField[:])))
	if err != nil || n < 0 || n > maxLineLen {
		return "", fmt.Errorf("bad PMI-2 frame length %q", lenField[:])
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", err
	}
	return string(body), nil
}

// parseFrame parses a PMI-2 frame's body: key=value pairs each ended by
// ';' (the last one's may be missing), ";;" standing for a ';' inside a
// value. The first key must be cmd.
func parseFrame(body string) (message, error) {
	m := message{vals: map[string]string{}}
	for i := 0; i < len(body); {
		eq := strings.IndexByte(body[i:], '=')
		if eq <= 0 {
			return message{}, fmt.Errorf("malformed PMI-2 message %q", truncate(body, 200))
		}
		key := body[i : i+eq]
		i += eq + 1
		var v strings.Builder
		for i < len(body) {
			if body[i] == ';' {
				if i+1 < len(body) && body[i+1] == ';' {
					v.WriteByte(';')
					i += 2
					continue
				}
				i++
				break
			}
			v.WriteByte(body[i])
			i++
		}
		if len(m.vals) == 0 && key != "cmd" {
			return message{}, fmt.Errorf("PMI-2 message %q does not start with cmd=", truncate(body, 200))
		}
		if _, dup := m.vals[key]; !dup {
			m.vals[key] = v.String()
		}
	}
	m.cmd = m.vals["cmd"]
	if m.cmd == "" {
		return message{}, fmt.Errorf("PMI-2 message %q has no cmd", truncate(body, 200))
	}
	return m, nil
}

// checkToken2 is checkToken with ';' refused as well.
func checkToken2(what, s string, max int, allowEmpty bool) error {
	if err := checkToken(what, s, max, allowEmpty); err != nil {
		return err
	}
	if strings.Contains(s, ";") {
		return fmt.Errorf("%s %q contains ';', which the PMI-2 wire protocol of Slurm cannot carry", what, truncate(s, 80))
	}
	return nil
}
