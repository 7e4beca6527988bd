package main

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// libmpichSoname is the library a program compiled with mpicc.mpich (or
// any MPICH-ABI compiler wrapper) loads; adimpi builds its own from
// cmd/libmpich.
const libmpichSoname = "libmpich.so.12"

// libmpichEnv names a directory holding a prebuilt libmpich.so.12 to use
// instead of building one.
const libmpichEnv = "ADIMPI_LIBMPICH_DIR"

// mpichLibs are the libraries of MPICH's ABI a program may link: the C
// library, and the Fortran and C++ bindings, which call the C library (so
// MPICH's own bindings run on adimpi's C library).
var mpichLibs = []string{libmpichSoname, "libmpichfort.so.12", "libmpichcxx.so.12"}

// needsLibmpich reports whether the executable at path is dynamically
// linked against MPICH's ABI library or its bindings. Only a regular file
// with an execute bit is opened: opening a FIFO (a program's argument may
// be one) would wait for its writer.
func needsLibmpich(path string) bool {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return false
	}
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return false
	}
	return slices.ContainsFunc(libs, func(l string) bool { return slices.Contains(mpichLibs, l) })
}

// wrapsLibmpich reports whether one of args names an executable (a path,
// or a command found in $PATH) linked against MPICH's ABI: binary is then a
// wrapper in front of a C program (strace, ltrace, perf, valgrind, env,
// time), which passes its environment on, library path included.
func wrapsLibmpich(args []string) bool {
	for _, a := range args {
		if a == "" || a[0] == '-' {
			continue
		}
		path := a
		if !strings.Contains(a, "/") {
			var err error
			if path, err = exec.LookPath(a); err != nil {
				continue
			}
		}
		if needsLibmpich(path) {
			return true
		}
	}
	return false
}

// prepareCProgram readies a C program for the ranks: when binary needs
// libmpich.so.12, or wraps a program that does (wrapsLibmpich, args being
// binary's arguments), it builds adimpi's (once; later runs reuse it) and
// returns the directory holding it, or "" for any other executable.
func prepareCProgram(binary string, args []string, stderr io.Writer) (string, error) {
	if !needsLibmpich(binary) && !wrapsLibmpich(args) {
		return "", nil
	}
	dir := os.Getenv(libmpichEnv)
	if dir == "" {
		var err error
		if dir, err = buildLibmpich(stderr); err != nil {
			return "", fmt.Errorf("%s links %s: %w", binary, libmpichSoname, err)
		}
	} else if _, err := os.Stat(filepath.Join(dir, libmpichSoname)); err != nil {
		return "", fmt.Errorf("%s=%s: %w", libmpichEnv, dir, err)
	}
	return dir, nil
}

// withLibraryDir returns env with dir first in its LD_LIBRARY_PATH, so that
// the ranks load adimpi's libmpich.so.12. Of duplicate settings it changes
// the last, which is the one exec passes on; when env has none, dir goes
// before mpirun's own. env itself is left unchanged.
func withLibraryDir(env []string, dir string) []string {
	i := len(env) - 1
	for i >= 0 && !strings.HasPrefix(env[i], "LD_LIBRARY_PATH=") {
		i--
	}
	old := os.Getenv("LD_LIBRARY_PATH")
	if i >= 0 {
		old = strings.TrimPrefix(env[i], "LD_LIBRARY_PATH=")
	}
	v := "LD_LIBRARY_PATH=" + dir
	if old == dir || strings.HasPrefix(old, dir+":") {
		v = "LD_LIBRARY_PATH=" + old
	} else if old != "" {
		v += ":" + old
	}
	env = slices.Clone(env)
	if i < 0 {
		return append(env, v)
	}
	env[i] = v
	return env
}

// buildLibmpich builds cmd/libmpich as a C shared library into mpirun's
// build cache ($XDG_CACHE_HOME/adimpi/mpirun/libmpich) and returns that
// directory. go build runs in mpirun's working directory, which must be
// inside the adimpi module or a module that requires it.
func buildLibmpich(stderr io.Writer) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("building adimpi's %s needs the go command in $PATH (or set %s): %w", libmpichSoname, libmpichEnv, err)
	}
	dir := filepath.Join(buildCacheDir(), "libmpich")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build cache: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("build cache: %w", err)
	}
	defer lock.Close() // closing releases the flock
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("build cache: lock %s: %w", dir, err)
	}
	// go build leaves its output alone when it is up to date, so the build
	// goes to a file of its own; the library the ranks load is replaced
	// (by a rename, which leaves ranks of a running job their old copy)
	// only when the build changed it.
	built := filepath.Join(dir, "build", libmpichSoname)
	cmd := exec.Command(goTool, "build", "-buildmode=c-shared",
		"-ldflags=-extldflags=-Wl,-soname,"+libmpichSoname,
		"-o", built, "github.com/adimpi/adimpi/cmd/libmpich")
	cmd.Stdout = stderr
	cmd.Stderr = stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build of adimpi's %s failed (run mpirun inside the adimpi module, or set %s): %v", libmpichSoname, libmpichEnv, err)
	}
	if err := install(built, filepath.Join(dir, libmpichSoname)); err != nil {
		return "", fmt.Errorf("build cache: %w", err)
	}
	return dir, nil
}

// install copies src to dst unless dst already has src's contents.
func install(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, b) {
		return nil
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
