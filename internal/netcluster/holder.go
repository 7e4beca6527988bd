package netcluster

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The holder's roles: a host, or the switch whose network namespace holds
// the bridge.
const (
	roleHost   = "host"
	roleSwitch = "switch"
)

// Environment of a holder: its role, its name, the hosts file to mount over
// /etc/hosts, and whether /tmp is private.
const (
	envRole       = "ADIMPI_NETCLUSTER_ROLE"
	envName       = "ADIMPI_NETCLUSTER_NAME"
	envHostsFile  = "ADIMPI_NETCLUSTER_HOSTS"
	envPrivateTmp = "ADIMPI_NETCLUSTER_PRIVATE_TMP"
)

// readyLine is what a holder writes when its host is set up; anything else
// is an error message.
const readyLine = "ready"

// holderEnv is the whole environment of a holder.
func holderEnv(role, name, hostsFile string, privateTmp bool) []string {
	env := []string{envRole + "=" + role, envName + "=" + name, envHostsFile + "=" + hostsFile}
	if privateTmp {
		env = append(env, envPrivateTmp+"=1")
	}
	return env
}

// init turns the process into a holder when Start re-executed this binary
// as one (or into a delay line, delay.go); in any other process it does
// nothing.
func init() {
	role := os.Getenv(envRole)
	switch role {
	case "":
		return
	case roleDelay:
		os.Exit(delayLine())
	}
	os.Exit(holder(role))
}

// holder sets up the host (or the switch), reports ready on stdout, then
// lives as PID 1 of its namespaces, reaping orphans, until its creator's
// end of the stdin pipe closes or it is told to stop.
func holder(role string) int {
	// Name the holder in ps and top (its executable is /proc/self/exe).
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&[]byte("nc-" + os.Getenv(envName) + "\x00")[0])), 0, 0, 0)
	var err error
	switch role {
	case roleHost:
		err = setupHost(os.Getenv(envName), os.Getenv(envHostsFile), os.Getenv(envPrivateTmp) == "1")
	case roleSwitch:
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stdout, "error: %v\n", err)
		return 1
	}
	fmt.Fprintln(os.Stdout, readyLine)
	// The report pipe is done with; keep fds 1 and 2 valid but silent.
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		unix.Dup2(int(null.Fd()), 1)
		unix.Dup2(int(null.Fd()), 2)
		null.Close()
	}

	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGCHLD, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	creatorGone := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(creatorGone)
	}()
	for {
		select {
		case <-creatorGone:
			return 0
		case s := <-sigs:
			if s != unix.SIGCHLD {
				return 0
			}
			for {
				var ws unix.WaitStatus
				pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}

// setupHost makes the holder's fresh namespaces a host: mounts that stay
// inside it, its hostname, a /proc and /sys of its own, a private /dev/shm
// (and /tmp if asked), and the cluster's hosts file as /etc/hosts.
func setupHost(name, hostsFile string, privateTmp bool) error {
	// Nothing mounted below may propagate back to the machine.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %v", err)
	}
	if err := unix.Sethostname([]byte(name)); err != nil {
		return fmt.Errorf("sethostname %s: %v", name, err)
	}
	// The hosts file is bound before /tmp is replaced, since it may live there.
	if err := unix.Mount(hostsFile, "/etc/hosts", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding %s on /etc/hosts: %v", hostsFile, err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %v", err)
	}
	// sysfs shows the network devices of the namespace that mounts it.
	unix.Unmount("/sys", unix.MNT_DETACH)
	if err := unix.Mount("sysfs", "/sys", "sysfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /sys: %v", err)
	}
	tmpfs := []string{"/dev/shm"}
	if privateTmp {
		tmpfs = append(tmpfs, "/tmp")
	}
	for _, dir := range tmpfs {
		if err := os.MkdirAll(dir, 0o1777); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return fmt.Errorf("mounting a tmpfs on %s: %v", dir, err)
		}
	}
	return nil
}
