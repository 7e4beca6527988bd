// Package testbuild builds the programs that multi-process tests start
// through mpirun.
package testbuild

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// Programs builds each package (a path relative to the test's directory,
// or an import path) into a temporary directory of t and returns the
// binaries by the base name of their package path. A build failure fails t
// with the compiler's output.
func Programs(t testing.TB, pkgs ...string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	bins := map[string]string{}
	for _, pkg := range pkgs {
		out := filepath.Join(dir, filepath.Base(pkg))
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
		bins[filepath.Base(pkg)] = out
	}
	return bins
}
