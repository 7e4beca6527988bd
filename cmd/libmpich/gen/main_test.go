package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratedFilesAreCurrent fails when spec.txt or abi_names.txt (or
// this generator) changed without "go generate ./cmd/libmpich".
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := generate("..")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what the generator writes now: run go generate ./cmd/libmpich", name)
		}
	}
}
