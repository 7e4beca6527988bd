package mpi

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSpawnTimeoutBound: a spawn waits for its children as long as the
// largest Info "timeout" of its commands says, else ADIMPI_SPAWN_TIMEOUT,
// else DefaultSpawnTimeout; a bad value is an error naming it.
func TestSpawnTimeoutBound(t *testing.T) {
	withTimeout := func(v string) SpawnCommand {
		info := NewInfo()
		if err := info.Set("timeout", v); err != nil {
			t.Fatal(err)
		}
		return SpawnCommand{Command: "x", MaxProcs: 1, Info: info}
	}
	t.Setenv(EnvSpawnTimeout, "")
	if d, err := spawnTimeout("MPI_Comm_spawn", []SpawnCommand{{Command: "x", MaxProcs: 1}}); err != nil || d != DefaultSpawnTimeout {
		t.Errorf("no Info, no %s: %v, %v; want %v", EnvSpawnTimeout, d, err, DefaultSpawnTimeout)
	}
	t.Setenv(EnvSpawnTimeout, "2m")
	if d, err := spawnTimeout("MPI_Comm_spawn", []SpawnCommand{{Command: "x", MaxProcs: 1}}); err != nil || d != 2*time.Minute {
		t.Errorf("%s=2m: %v, %v; want 2m", EnvSpawnTimeout, d, err)
	}
	if d, err := spawnTimeout("MPI_Comm_spawn_multiple", []SpawnCommand{withTimeout("2.5"), withTimeout("7s")}); err != nil || d != 7*time.Second {
		t.Errorf("Info timeout 2.5 and 7s: %v, %v; want 7s (the largest, over the environment)", d, err)
	}
	if _, err := spawnTimeout("MPI_Comm_spawn", []SpawnCommand{withTimeout("soon")}); !errors.Is(err, ErrArg) || !strings.Contains(err.Error(), `"soon"`) {
		t.Errorf("Info timeout soon: %v; want MPI_ERR_ARG naming \"soon\"", err)
	}
	t.Setenv(EnvSpawnTimeout, "-1")
	if _, err := spawnTimeout("MPI_Comm_spawn", nil); !errors.Is(err, ErrArg) || !strings.Contains(err.Error(), EnvSpawnTimeout) {
		t.Errorf("%s=-1: %v; want MPI_ERR_ARG naming the variable", EnvSpawnTimeout, err)
	}
}

// TestCheckLocalCommand: a command whose Info "host" is this host must
// resolve here (through wdir, path and $PATH); one for another host, or
// for the launcher's choice, is not checked.
func TestCheckLocalCommand(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	me, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	cmd := func(command string, kv ...string) SpawnCommand {
		info := NewInfo()
		for i := 0; i < len(kv); i += 2 {
			if err := info.Set(kv[i], kv[i+1]); err != nil {
				t.Fatal(err)
			}
		}
		return SpawnCommand{Command: command, MaxProcs: 1, Info: info}
	}
	for _, tc := range []struct {
		c    SpawnCommand
		want string // "" for no error, else part of it
	}{
		{cmd(prog, "host", me), ""},
		{cmd("./prog", "host", "localhost", "wdir", dir), ""},
		{cmd("prog", "host", me, "path", dir), ""},
		{cmd("/nonexistent/prog", "host", me), "no executable file /nonexistent/prog on host " + me},
		{cmd("prog", "host", me, "path", "/nonexistent"), "not found on host " + me},
		{cmd(prog, "host", me, "wdir", "/nonexistent"), `Info "wdir" "/nonexistent" is not a directory`},
		{cmd("/nonexistent/prog"), ""},
		{cmd("/nonexistent/prog", "host", "another-host.invalid"), ""},
	} {
		err := checkLocalCommand(0, tc.c)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %v: %v; want no error", tc.c.Command, tc.c.Info.vals, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %v: %v; want an error with %q", tc.c.Command, tc.c.Info.vals, err, tc.want)
		}
	}
}
