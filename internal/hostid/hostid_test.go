package hostid

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/adimpi/adimpi/internal/testnote"
)

func TestSelfIsStable(t *testing.T) {
	a, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Self()
	if a != b || strings.Count(string(a), "/") != 2 || !strings.Contains(string(a), "pid:[") || !strings.Contains(string(a), "mnt:[") {
		t.Fatalf("Self() = %q then %q", a, b)
	}
}

// TestOtherNamespacesDiffer: a process in a new PID and mount namespace
// (unshare, as root) reports another ID; a child in ours reports the same.
func TestOtherNamespacesDiffer(t *testing.T) {
	if os.Getenv("HOSTID_PRINT") == "1" {
		id, err := Self()
		if err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString(string(id))
		os.Exit(0)
	}
	self, _ := Self()
	run := func(prefix ...string) ID {
		args := append(prefix, os.Args[0], "-test.run=^TestOtherNamespacesDiffer$")
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "HOSTID_PRINT=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return ID(out)
	}
	if got := run(); got != self {
		t.Fatalf("a child in the same namespaces reports %q, not %q", got, self)
	}
	if os.Geteuid() != 0 {
		testnote.Skip(t, "internal/hostid: not root, cannot unshare PID and mount namespaces")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatalf("unshare (util-linux) is missing: %v", err)
	}
	if got := run("unshare", "--pid", "--fork", "--mount"); got == self {
		t.Fatalf("a process in new PID and mount namespaces reports our ID %q", got)
	}
}

func TestMap(t *testing.T) {
	got := Map([]ID{"b", "a", "b", "c", "a"})
	if want := []int{0, 1, 0, 2, 1}; !slices.Equal(got, want) {
		t.Fatalf("Map = %v, want %v", got, want)
	}
}
