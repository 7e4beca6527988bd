package conformance

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// userProgram is a program in a module of its own that uses adimpi.
const userProgram = `package main

import (
	"fmt"
	"log"

	"github.com/adimpi/adimpi/mpi"
)

func main() {
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	w := mpi.World()
	sum := []int{0}
	if err := mpi.Allreduce(w, []int{w.Rank() + 1}, sum, mpi.Sum); err != nil {
		log.Fatal(err)
	}
	if w.Rank() == 0 {
		fmt.Println("ranks", w.Size(), "sum", sum[0])
	}
	if err := mpi.Finalize(); err != nil {
		log.Fatal(err)
	}
}
`

// TestOwnModule follows the README's "Using adimpi from your own module"
// recipe in a fresh module that requires adimpi through a replace of this
// checkout: go get -tool for mpirun (which records the go.sum entries of
// mpirun's own dependencies, which the program's imports alone do not),
// then, with the go command read-only as by default, go tool mpirun and
// go run github.com/adimpi/adimpi/cmd/mpirun both build and run the
// program on 3 ranks. The builds run offline (GOPROXY=off, the module
// cache as it is, GOSUMDB=off since go.sum is new), which proves go.sum is
// complete; go mod tidy uses the environment's proxy as a user's would,
// because it also loads the tests of dependencies (cilium/ebpf's import
// go-quicktest and go-cmp), whose modules no build downloads.
func TestOwnModule(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(gomod)
	if goLine == nil {
		t.Fatal("no go line in go.mod")
	}
	dir := t.TempDir()
	mod := "module example.com/adimpiuser\n\n" + string(goLine) + "\n\nrequire github.com/adimpi/adimpi v0.0.0\n\nreplace github.com/adimpi/adimpi => " + root + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(userProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(goflags string, args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOSUMDB=off", "GOFLAGS="+goflags, "GOWORK=off")
		if args[0] != "mod" {
			cmd.Env = append(cmd.Env, "GOPROXY=off")
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("go %s (GOFLAGS=%s) in the user's module: %v\n%s", strings.Join(args, " "), goflags, err, out.String())
			}
		case <-time.After(mpirunTimeout):
			cmd.Process.Kill()
			<-done
			t.Fatalf("go %s: no end after %v\n%s", strings.Join(args, " "), mpirunTimeout, out.String())
		}
		return out.String()
	}
	run("-mod=mod", "get", "-tool", "github.com/adimpi/adimpi/cmd/mpirun@v0.0.0")
	run("-mod=mod", "mod", "tidy")
	for _, args := range [][]string{
		{"tool", "mpirun", "-np", "3", "-timeout", "60s", "."},
		{"run", "github.com/adimpi/adimpi/cmd/mpirun", "-np", "3", "-timeout", "60s", "."},
	} {
		if out := run("", args...); !strings.Contains(out, "ranks 3 sum 6") {
			t.Errorf("go %s printed %q, want \"ranks 3 sum 6\"", strings.Join(args, " "), out)
		}
	}
}
