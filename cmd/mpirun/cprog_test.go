package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestNeedsLibmpich checks which executables mpirun gives adimpi's
// libmpich.so.12: those whose ELF header names it, and no other.
func TestNeedsLibmpich(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if needsLibmpich(self) {
		t.Errorf("the Go test binary %s was taken for a program linked against libmpich.so.12", self)
	}
	if needsLibmpich(filepath.Join(t.TempDir(), "missing")) {
		t.Error("a missing file was taken for a program linked against libmpich.so.12")
	}
	script := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if needsLibmpich(script) {
		t.Error("a shell script was taken for a program linked against libmpich.so.12")
	}
	if _, err := exec.LookPath("mpicc.mpich"); err != nil {
		t.Log("mpicc.mpich missing: the positive case is covered by cmd/libmpich's tests only")
		return
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "p.c")
	if err := os.WriteFile(src, []byte("#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); return MPI_Finalize(); }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "p")
	if out, err := exec.Command("mpicc.mpich", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("mpicc.mpich: %v\n%s", err, out)
	}
	if !needsLibmpich(bin) {
		t.Errorf("a program built with mpicc.mpich was not taken for one linked against libmpich.so.12")
	}
	// MPICH's Fortran bindings call its C library: a Fortran program links
	// libmpichfort.so.12 only.
	if _, err := exec.LookPath("mpif90.mpich"); err != nil {
		return
	}
	fsrc := filepath.Join(dir, "p.f90")
	if err := os.WriteFile(fsrc, []byte("program p\n  use mpi\n  integer :: ierr\n  call MPI_Init(ierr)\n  call MPI_Finalize(ierr)\nend program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fbin := filepath.Join(dir, "pf")
	if out, err := exec.Command("mpif90.mpich", "-o", fbin, fsrc).CombinedOutput(); err != nil {
		t.Fatalf("mpif90.mpich: %v\n%s", err, out)
	}
	if !needsLibmpich(fbin) {
		t.Errorf("a program built with mpif90.mpich was not taken for one that needs libmpich.so.12")
	}
}

// TestWrapsLibmpichArguments checks what mpirun makes of a program's
// arguments when it looks for a C program behind a wrapper: a FIFO among
// them (a test's gate, say) is not opened, which would wait for its
// writer and hang mpirun before any rank starts, and flags, bare names
// not in $PATH and files that are not executables are no C program.
func TestWrapsLibmpichArguments(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.WriteFile(data, []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool, 1)
	go func() { done <- wrapsLibmpich([]string{"-x", "plain", fifo, data, "no-such-command-here"}) }()
	select {
	case got := <-done:
		if got {
			t.Error("arguments with no C program among them were taken for a wrapper's")
		}
	case <-time.After(time.Minute):
		t.Fatal("wrapsLibmpich still waits after a minute: it opened the FIFO")
	}
}
