// Package pmi implements the PMI-1 wire protocol used between an MPI
// process and its launcher: a client (used by the MPI runtime inside every
// rank) and a server (used by mpirun).
//
// A PMI-1 message is one line of space-separated key=value tokens ending in
// '\n'; the first token is normally cmd=NAME. The client interoperates with
// MPICH's Hydra (mpiexec.hydra), which hands each rank an inherited socket
// through the PMI_FD environment variable. The same client speaks PMI-2
// (pmi2.go) to a launcher that offers it, as Slurm's srun --mpi=pmi2 does.
package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Protocol limits advertised by Server in reply to cmd=get_maxes and
// enforced by Client.Put.
const (
	// MaxKVSNameLen is the longest key-value space name.
	MaxKVSNameLen = 256
	// MaxKeyLen is the longest key accepted by Put.
	MaxKeyLen = 64
	// MaxValueLen is the longest value accepted by Put.
	MaxValueLen = 1024
)

// maxLineLen bounds a single protocol line; anything longer is a protocol
// error. The largest legitimate line (a put) is well under 2 KiB.
const maxLineLen = 64 * 1024

// ErrKeyNotFound is wrapped by errors from Client.Get when the key has not
// been put by any rank.
var ErrKeyNotFound = errors.New("key not found")

// message is one parsed protocol line.
type message struct {
	cmd  string
	vals map[string]string
}

// get returns the value of key and whether it was present.
func (m message) get(key string) (string, bool) {
	v, ok := m.vals[key]
	return v, ok
}

// rc returns the message's rc value; a missing rc counts as success (0),
// because Hydra omits it from some replies.
func (m message) rc() (int, error) {
	v, ok := m.vals["rc"]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("bad rc=%q in %s reply", v, m.cmd)
	}
	return n, nil
}

// parseLine parses one protocol line (with or without its trailing newline).
// Tokens are separated by spaces; each token is key=value split at the first
// '='. A cmd key is required; unknown keys are kept and ignored by callers.
func parseLine(line string) (message, error) {
	line = strings.TrimSuffix(line, "\n")
	line = strings.TrimSuffix(line, "\r")
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return message{}, errors.New("empty message")
	}
	m := message{vals: make(map[string]string, len(fields))}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return message{}, fmt.Errorf("malformed token %q in message %q", f, line)
		}
		m.vals[k] = v
	}
	cmd, ok := m.vals["cmd"]
	if !ok || cmd == "" {
		return message{}, fmt.Errorf("message %q has no cmd", line)
	}
	m.cmd = cmd
	return m, nil
}

// formatLine builds a protocol line "cmd=NAME k1=v1 k2=v2\n" from cmd and
// alternating keys and values.
func formatLine(cmd string, kv ...string) string {
	var b strings.Builder
	b.WriteString("cmd=")
	b.WriteString(cmd)
	for i := 0; i+1 < len(kv); i += 2 {
		b.WriteByte(' ')
		b.WriteString(kv[i])
		b.WriteByte('=')
		b.WriteString(kv[i+1])
	}
	b.WriteByte('\n')
	return b.String()
}

// readLine reads one '\n'-terminated line of at most maxLineLen bytes. A
// final line without a newline is returned together with io.EOF being
// reported on the next call. An over-long line is an error.
func readLine(r *bufio.Reader) (string, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxLineLen {
			return "", fmt.Errorf("protocol line longer than %d bytes", maxLineLen)
		}
		switch {
		case err == nil:
			return string(buf), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(buf) > 0:
			return string(buf), nil
		default:
			return "", err
		}
	}
}

// checkToken reports why s cannot be sent as a key or value of at most max
// bytes: PMI-1 has no quoting, so spaces, tabs, newlines and '=' are
// forbidden.
func checkToken(what, s string, max int, allowEmpty bool) error {
	if s == "" && !allowEmpty {
		return fmt.Errorf("empty %s", what)
	}
	if len(s) > max {
		return fmt.Errorf("%s is %d bytes, longer than the limit of %d", what, len(s), max)
	}
	if i := strings.IndexAny(s, " \t\r\n=\x00"); i >= 0 {
		return fmt.Errorf("%s %q contains %q, which PMI-1 cannot carry", what, truncate(s, 80), s[i])
	}
	return nil
}

// truncate shortens s for use in error messages.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// escapeText makes free text (an abort message) safe to send as a single
// value by percent-encoding control characters, spaces, '=' and '%'.
func escapeText(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c == '=' || c == '%' || c == 0x7f {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// unescapeText reverses escapeText; malformed escapes are kept literally.
func unescapeText(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
