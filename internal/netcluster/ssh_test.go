package netcluster

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// With Options.SSH every host runs an sshd that takes the cluster's key:
// from h1, ssh reaches every host by name and by address, with strict host
// key checking against the cluster's known_hosts, and runs the command in
// that host's namespaces. Close leaves no sshd behind.
func TestSSH(t *testing.T) {
	c := StartSSHT(t, 3)
	for _, target := range []string{"h1", "h2", "198.18.0.3"} {
		out, err := c.Command("h1", c.SSHCommand(), target, "hostname; cat /proc/1/comm").CombinedOutput()
		want := map[string]string{"h1": "h1", "h2": "h2", "198.18.0.3": "h3"}[target]
		if err != nil || strings.Fields(string(out))[0] != want {
			t.Errorf("ssh %s from h1: %v: %q, want hostname %s", target, err, out, want)
		}
	}
	// A host key that does not match known_hosts is refused.
	cfg := c.SSHConfig()
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), "UserKnownHostsFile "+c.SSHDir()+"/known_hosts", "UserKnownHostsFile /dev/null", 1)
	badCfg := c.SSHDir() + "/bad_config"
	if err := os.WriteFile(badCfg, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Command("h1", "ssh", "-F", badCfg, "h2", "true").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "Host key verification failed") {
		t.Errorf("ssh with no known hosts: want host key verification to fail, got %v: %s", err, out)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("pgrep", "-f", c.SSHDir()).Output(); len(out) > 0 {
		t.Errorf("sshd processes left after Close: %s", out)
	}
}
