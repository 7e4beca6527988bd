package testproc

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"
)

// StartPiped starts cmd with its standard output readable through the
// returned reader and its standard error collected in the returned builder,
// failing t if the command cannot start.
func StartPiped(t testing.TB, cmd *exec.Cmd) (*bufio.Reader, *strings.Builder) {
	t.Helper()
	stderr := new(strings.Builder)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return bufio.NewReader(out), stderr
}
