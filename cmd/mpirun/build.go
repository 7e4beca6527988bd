package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// buildCacheDir is where mpirun keeps the binaries it builds: one
// directory per (working directory, target) pair, reused by later runs.
// A binary is never a temporary file, so no exit path of mpirun (a SIGPIPE
// from "mpirun ... | head", a SIGKILL) can leave one behind, and an
// unchanged package is not linked again: go build leaves an up-to-date
// output alone.
func buildCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "adimpi", "mpirun")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("adimpi-mpirun-cache-%d", os.Getuid()))
}

// goBuild builds target (a .go file, directory or import path) into its
// directory of the build cache and returns the binary's path and a function
// to call once the ranks have started: until then the directory is locked,
// so that a concurrent mpirun building the same target does not replace
// the binary between this build and the ranks' exec. go build's messages
// go to stderr.
func goBuild(target string, stderr io.Writer) (string, func(), error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", nil, fmt.Errorf("building %s needs the go command in $PATH: %w", target, err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256([]byte(cwd + "\x00" + target + "\x00" + goTool))
	dir := filepath.Join(buildCacheDir(), hex.EncodeToString(sum[:12]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("build cache: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", nil, fmt.Errorf("build cache: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		lock.Close()
		return "", nil, fmt.Errorf("build cache: lock %s: %w", dir, err)
	}
	unlock := func() { lock.Close() } // closing releases the flock
	out := filepath.Join(dir, binaryName(target))
	cmd := exec.Command(goTool, "build", "-o", out, target)
	cmd.Stdout = stderr
	cmd.Stderr = stderr
	if err := cmd.Run(); err != nil {
		unlock()
		return "", nil, fmt.Errorf("go build %s failed: %v", target, err)
	}
	return out, unlock, nil
}

// binaryName is the file name go build would give target's binary.
func binaryName(target string) string {
	name := strings.TrimSuffix(filepath.Base(target), ".go")
	if !strings.HasSuffix(target, ".go") {
		if abs, err := filepath.Abs(target); err == nil && strings.HasPrefix(target, ".") {
			name = filepath.Base(abs)
		} else {
			name = path.Base(target)
		}
	}
	if name == "" || name == "." || name == "/" {
		name = "prog"
	}
	return name
}
