package main

import (
	"slices"
	"testing"
)

func TestWithoutRseq(t *testing.T) {
	cases := []struct {
		in, want []string
	}{
		{[]string{"A=1"}, []string{"A=1", "GLIBC_TUNABLES=glibc.pthread.rseq=0"}},
		{[]string{"GLIBC_TUNABLES=glibc.malloc.arena_max=2"}, []string{"GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.pthread.rseq=0"}},
		{[]string{"GLIBC_TUNABLES="}, []string{"GLIBC_TUNABLES=glibc.pthread.rseq=0"}},
		{[]string{"GLIBC_TUNABLES=glibc.pthread.rseq=1"}, []string{"GLIBC_TUNABLES=glibc.pthread.rseq=1"}},
		{[]string{"GLIBC_TUNABLES=x=1:glibc.pthread.rseq=1"}, []string{"GLIBC_TUNABLES=x=1:glibc.pthread.rseq=1"}},
	}
	for _, c := range cases {
		if got := withoutRseq(slices.Clone(c.in)); !slices.Equal(got, c.want) {
			t.Errorf("withoutRseq(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
