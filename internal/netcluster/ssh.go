package netcluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"time"
)

// The ssh setup of a cluster started with Options.SSH lives in the
// cluster's directory, under sshDirName: a client key pair, every host's
// host key, the authorized_keys and known_hosts files built from them, the
// sshd and ssh configuration files, a wrapper script that runs ssh with
// that configuration, and each sshd's log. Nothing is read from or written
// to the machine's own ~/.ssh or /etc/ssh: the client is always run with
// -F (which skips ~/.ssh/config and /etc/ssh/ssh_config), its known hosts
// and identity are named explicitly, and every sshd gets its own
// configuration file and host key on its command line.
const (
	sshDirName      = "ssh"
	sshConfigName   = "ssh_config"
	sshdConfigName  = "sshd_config"
	sshWrapperName  = "ssh"
	sshIdentityName = "id_ed25519"
	sshKnownHosts   = "known_hosts"
	sshAuthorized   = "authorized_keys"
	// sshdPrivsepDir must exist for sshd to start (it chroots its
	// unprivileged children there); Debian's init scripts make it at boot.
	sshdPrivsepDir = "/run/sshd"
	// sshdReadyTimeout bounds the wait for an sshd to listen.
	sshdReadyTimeout = 20 * time.Second
)

// sshdPath is where Debian's openssh-server puts sshd; sshd must be run by
// its absolute path (it re-executes itself for every connection).
var sshdPath = "/usr/sbin/sshd"

// SSHDir is the directory of the cluster's ssh setup (keys, configuration
// files, logs), present when the cluster was started with Options.SSH.
func (c *Cluster) SSHDir() string { return filepath.Join(c.Dir, sshDirName) }

// SSHConfig is the ssh client configuration file that logs in to every
// host of the cluster with the cluster's key: ssh -F SSHConfig() h2 cmd,
// run on one of the hosts.
func (c *Cluster) SSHConfig() string { return filepath.Join(c.SSHDir(), sshConfigName) }

// SSHCommand is an executable script called ssh that runs the real ssh
// (by its absolute path) with SSHConfig and passes its arguments on, for
// launchers that take the path of their ssh (mpirun -launcher-exec,
// Hydra's -launcher-exec, Open MPI's plm_rsh_agent), or that run "ssh"
// from PATH when SSHDir comes first in it.
func (c *Cluster) SSHCommand() string { return filepath.Join(c.SSHDir(), sshWrapperName) }

// HasSSH reports whether the cluster's hosts run sshd (it was started with
// Options.SSH), so that a cluster found by Open can tell.
func (c *Cluster) HasSSH() bool {
	_, err := os.Stat(c.SSHConfig())
	return err == nil
}

// CheckSSH reports what is missing on this machine for Options.SSH.
func CheckSSH() error {
	if _, err := os.Stat(sshdPath); err != nil {
		return fmt.Errorf("netcluster: %s not found (install Debian's openssh-server): %v", sshdPath, err)
	}
	for _, tool := range []string{"ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("netcluster: %s not found (install Debian's openssh-client): %v", tool, err)
		}
	}
	return nil
}

// startSSH makes the cluster's keys and configuration files and starts an
// sshd on every host, listening on the host's address, port 22. The sshds
// are processes of their hosts and die with them; Close waits for them.
func (c *Cluster) startSSH(privateTmp bool) error {
	if err := CheckSSH(); err != nil {
		return err
	}
	if privateTmp && strings.HasPrefix(c.Dir+"/", os.TempDir()+"/") {
		return fmt.Errorf("netcluster: ssh with a private /tmp needs the cluster's directory outside %s (the hosts must see its keys): %s", os.TempDir(), c.Dir)
	}
	dir := c.SSHDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("netcluster: %v", err)
	}
	if err := os.MkdirAll(sshdPrivsepDir, 0o755); err != nil {
		return fmt.Errorf("netcluster: sshd needs %s: %v", sshdPrivsepDir, err)
	}
	keygen := func(path, comment string) (string, error) {
		if err := run(exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path)); err != nil {
			return "", fmt.Errorf("netcluster: %v", err)
		}
		pub, err := os.ReadFile(path + ".pub")
		return strings.TrimSpace(string(pub)), err
	}
	clientPub, err := keygen(filepath.Join(dir, sshIdentityName), "netcluster-client")
	if err != nil {
		return err
	}
	var known strings.Builder
	for _, h := range c.Hosts {
		pub, err := keygen(c.hostKey(h.Name), h.Name)
		if err != nil {
			return err
		}
		fmt.Fprintf(&known, "%s,%s %s\n", h.Name, h.Addr, pub)
	}
	sshBin, err := exec.LookPath("ssh")
	if err != nil {
		return fmt.Errorf("netcluster: %v", err)
	}
	if sshBin, err = filepath.Abs(sshBin); err != nil {
		return fmt.Errorf("netcluster: %v", err)
	}
	me := "root"
	if u, err := user.Current(); err == nil {
		me = u.Username
	}
	files := []struct {
		name string
		mode os.FileMode
		text string
	}{
		{sshAuthorized, 0o600, clientPub + "\n"},
		{sshKnownHosts, 0o644, known.String()},
		{sshdConfigName, 0o644, sshdConfig(dir)},
		{sshConfigName, 0o644, sshClientConfig(dir, me)},
		{sshWrapperName, 0o755, "#!/bin/sh\n# Written by netcluster: ssh onto the simulated hosts with the cluster's key.\nexec '" + sshBin + "' -F '" + filepath.Join(dir, sshConfigName) + "' \"$@\"\n"},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.text), f.mode); err != nil {
			return fmt.Errorf("netcluster: %v", err)
		}
	}
	for _, h := range c.Hosts {
		if err := c.startSSHD(h); err != nil {
			return err
		}
	}
	return nil
}

// hostKey is the path of host's private host key.
func (c *Cluster) hostKey(host string) string {
	return filepath.Join(c.SSHDir(), "ssh_host_ed25519_key."+host)
}

// sshdConfig is the configuration every host's sshd reads: key login only,
// from the cluster's authorized_keys (StrictModes off because the file may
// sit under a world-writable /tmp), no PAM, no pid file, and enough
// concurrent logins for a launcher that starts every rank through ssh at
// once. The listen address and host key come on sshd's command line.
func sshdConfig(dir string) string {
	return "# Written by netcluster for the sshd of every simulated host.\n" +
		"Port 22\n" +
		"AuthorizedKeysFile " + filepath.Join(dir, sshAuthorized) + "\n" +
		"PermitRootLogin prohibit-password\n" +
		"PubkeyAuthentication yes\n" +
		"PasswordAuthentication no\n" +
		"KbdInteractiveAuthentication no\n" +
		"UsePAM no\n" +
		"StrictModes no\n" +
		"PidFile none\n" +
		"PrintMotd no\n" +
		"PrintLastLog no\n" +
		"UseDNS no\n" +
		"X11Forwarding no\n" +
		"MaxStartups 200\n" +
		"MaxSessions 200\n" +
		"LogLevel VERBOSE\n"
}

// sshClientConfig is the ssh client configuration for the cluster: the
// cluster's key and known hosts only, strict host key checking, no
// prompts.
func sshClientConfig(dir, user string) string {
	return "# Written by netcluster: use with ssh -F this-file, from a simulated host.\n" +
		"Host *\n" +
		"  User " + user + "\n" +
		"  IdentityFile " + filepath.Join(dir, sshIdentityName) + "\n" +
		"  IdentitiesOnly yes\n" +
		"  IdentityAgent none\n" +
		"  UserKnownHostsFile " + filepath.Join(dir, sshKnownHosts) + "\n" +
		"  GlobalKnownHostsFile /dev/null\n" +
		"  StrictHostKeyChecking yes\n" +
		"  UpdateHostKeys no\n" +
		"  CheckHostIP no\n" +
		"  BatchMode yes\n" +
		"  ConnectTimeout 10\n" +
		"  ForwardX11 no\n" +
		"  ForwardAgent no\n" +
		"  LogLevel ERROR\n"
}

// startSSHD starts h's sshd in the foreground inside h, logging to a file
// in the ssh directory, and returns once it listens (sshd says so in its
// log at LogLevel VERBOSE).
func (c *Cluster) startSSHD(h Host) error {
	logPath := filepath.Join(c.SSHDir(), "sshd."+h.Name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("netcluster: %v", err)
	}
	cmd := c.Command(h.Name, sshdPath, "-D", "-e", "-f", filepath.Join(c.SSHDir(), sshdConfigName),
		"-h", c.hostKey(h.Name), "-o", "ListenAddress="+h.Addr.String())
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	out, err := cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return fmt.Errorf("netcluster: %v", err)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("netcluster: starting sshd on %s: %v", h.Name, err)
	}
	c.sshds = append(c.sshds, cmd)
	ready := make(chan error, 1)
	go func() {
		defer logf.Close()
		br := bufio.NewReader(out)
		var seen strings.Builder
		for {
			line, err := br.ReadString('\n')
			logf.WriteString(line)
			if strings.Contains(line, "Server listening on "+h.Addr.String()) {
				ready <- nil
				io.Copy(logf, br)
				return
			}
			seen.WriteString(line)
			if err != nil {
				ready <- fmt.Errorf("netcluster: sshd on %s exited: %s", h.Name, strings.TrimSpace(seen.String()))
				return
			}
		}
	}()
	select {
	case err := <-ready:
		return err
	case <-time.After(sshdReadyTimeout):
		return fmt.Errorf("netcluster: sshd on %s did not listen within %v (see %s)", h.Name, sshdReadyTimeout, logPath)
	}
}

// stopSSH waits for the sshds, which die with their hosts' holders, and
// removes the ssh directory unless the whole cluster directory goes.
func (c *Cluster) stopSSH() error {
	for _, cmd := range c.sshds {
		cmd.Process.Kill()
		cmd.Wait() // killed: the status is of no interest
	}
	c.sshds = nil
	if c.tempDir {
		return nil
	}
	if err := os.RemoveAll(c.SSHDir()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("netcluster: %v", err)
	}
	return nil
}

// StartSSHT starts a cluster of n hosts, each running sshd, for a test, as
// StartT does. Without sshd, ssh or ssh-keygen the test is skipped with the
// reason, except under CI (CI set), where it fails: CI installs them.
func StartSSHT(t TB, n int) *Cluster {
	t.Helper()
	if os.Geteuid() != 0 && os.Getenv("CI") == "" {
		t.Skipf("SKIPPED: netcluster needs root to create namespaces (running as uid %d; CI is not set, so this is a skip, not a failure)", os.Geteuid())
	}
	if err := CheckSSH(); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("SKIPPED: %v (CI is not set, so this is a skip, not a failure)", err)
		}
		t.Fatalf("%v", err)
	}
	c, err := Start(Options{Hosts: n, Dir: t.TempDir(), SSH: true})
	if err != nil {
		t.Fatalf("cannot create a simulated cluster of %d hosts with sshd: %v", n, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("tearing down the simulated cluster: %v", err)
		}
	})
	return c
}
