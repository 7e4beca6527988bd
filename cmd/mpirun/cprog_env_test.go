package main

import (
	"slices"
	"testing"
)

// withLibraryDir puts the library's directory first in the setting exec
// passes on (the last of duplicates), once, and keeps what was there.
func TestWithLibraryDir(t *testing.T) {
	t.Setenv("LD_LIBRARY_PATH", "/mpirun/own")
	for _, c := range []struct {
		env, want []string
	}{
		{[]string{"A=1"}, []string{"A=1", "LD_LIBRARY_PATH=/lib/adimpi:/mpirun/own"}},
		{[]string{"LD_LIBRARY_PATH=/x", "B=2", "LD_LIBRARY_PATH=/y"}, []string{"LD_LIBRARY_PATH=/x", "B=2", "LD_LIBRARY_PATH=/lib/adimpi:/y"}},
		{[]string{"LD_LIBRARY_PATH=/lib/adimpi:/y"}, []string{"LD_LIBRARY_PATH=/lib/adimpi:/y"}},
		{[]string{"LD_LIBRARY_PATH="}, []string{"LD_LIBRARY_PATH=/lib/adimpi"}},
	} {
		in := slices.Clone(c.env)
		if got := withLibraryDir(c.env, "/lib/adimpi"); !slices.Equal(got, c.want) {
			t.Errorf("withLibraryDir(%q) = %q, want %q", c.env, got, c.want)
		}
		if !slices.Equal(in, c.env) {
			t.Errorf("withLibraryDir changed its argument to %q", c.env)
		}
	}
}
