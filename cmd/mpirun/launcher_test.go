package main

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitCommand(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{"netcluster exec -dir /tmp/d {host} --", []string{"netcluster", "exec", "-dir", "/tmp/d", "{host}", "--"}, ""},
		{"  ip\tnetns  exec {host}\n", []string{"ip", "netns", "exec", "{host}"}, ""},
		{`a 'b c' "d \"e\" \$f \x" g\ h ''`, []string{"a", "b c", `d "e" $f \x`, "g h", ""}, ""},
		{`x'y'"z"`, []string{"xyz"}, ""},
		{"", nil, ""},
		{"a 'b", nil, "unterminated single quote"},
		{`a "b`, nil, "unterminated double quote"},
		{`a \`, nil, "backslash at the end"},
	} {
		got, err := splitCommand(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("splitCommand(%q) = %q, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("splitCommand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if got := launcherArgv([]string{"ssh", "{host}", "--x={host}.d"}, "h2"); !slices.Equal(got, []string{"ssh", "h2", "--x=h2.d"}) {
		t.Errorf("launcherArgv: %q", got)
	}
}

func TestPlace(t *testing.T) {
	hosts := func(spec ...int) []host {
		var hs []host
		for i, s := range spec {
			hs = append(hs, host{name: string(rune('a' + i)), slots: s})
		}
		return hs
	}
	names := func(hs []host, idx []int) string {
		var b strings.Builder
		for _, i := range idx {
			b.WriteString(hs[i].name)
		}
		return b.String()
	}
	for _, tc := range []struct {
		hosts      []host
		np, ppn    int
		roundRobin bool
		want       string
	}{
		{hosts(0, 0, 0), 5, 0, false, "aabbc"}, // even shares, the first hosts one more
		{hosts(0, 0, 0), 5, 0, true, "abcab"},
		{hosts(2, 0, 1), 6, 0, false, "aabcaa"}, // a host without slots takes one; then another round
		{hosts(2, 0, 1), 5, 0, true, "abcaa"},
		{hosts(3, 3), 4, 1, false, "abab"}, // -ppn overrides slots
		{hosts(1, 3, 2), 6, 0, true, "abcbcb"},
	} {
		if got := names(tc.hosts, place(tc.hosts, tc.np, tc.ppn, tc.roundRobin)); got != tc.want {
			t.Errorf("place(%v, np %d, ppn %d, rr %t) = %s, want %s", tc.hosts, tc.np, tc.ppn, tc.roundRobin, got, tc.want)
		}
	}
}

// A launcher command that does not pass the descriptors through gets a
// clear message from the proxy instead of a rank cut off from mpirun. (A
// shell stands in for the launcher: no other host is needed.)
func TestLauncherClosesDescriptors(t *testing.T) {
	res := run(t, nil, nil, "-hosts", "otherhost", "-launcher-exec", `sh -c 'exec 4>&-; exec "$@"' sh`, rankprogBin, "env")
	if res.code != exitCannotExec || !strings.Contains(res.stderr, "descriptor 4 is not mpirun's control pipe: the -launcher-exec command must pass open descriptors through") ||
		!strings.Contains(res.stderr, "mpirun: rank 0 on otherhost (launcher pid ") {
		t.Errorf("want exit %d and the proxy's message: %v", exitCannotExec, res)
	}
	// The same shell passing everything through is a working launcher.
	res = run(t, nil, nil, "-hosts", "otherhost:2", "-l", "-launcher-exec", `sh -c 'exec "$@"' sh`, rankprogBin, "env")
	if res.code != 0 {
		t.Fatal(res)
	}
	wantLines(t, "sh launcher", res, "[0@otherhost] rank 0 PMI_SIZE=2", "[1@otherhost] rank 1 PMI_FD=3")
}
