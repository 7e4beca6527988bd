package wire

import (
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
)

// Environment variables the launcher sets for the wire.
const (
	// EnvAddr overrides the address a rank listens on (an IPv4 address,
	// without a port).
	EnvAddr = "ADIMPI_WIRE_ADDR"
	// EnvSecret is the job's secret, in hex, made by the launcher.
	EnvSecret = "ADIMPI_JOB_SECRET"
)

// HostAddr picks the IPv4 address this process listens on: EnvAddr if set,
// else the first address of an interface that is up and not loopback, else
// 127.0.0.1 (a host with no network reaches only itself).
func HostAddr() (netip.Addr, error) {
	if v := os.Getenv(EnvAddr); v != "" {
		a, err := netip.ParseAddr(v)
		if err != nil || !a.Is4() {
			return netip.Addr{}, fmt.Errorf("wire: %s=%q: want an IPv4 address", EnvAddr, v)
		}
		return a, nil
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("wire: listing interfaces: %v", err)
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(ipn.IP.To4()); ok && ip.Is4() && !ip.IsLinkLocalUnicast() {
					return ip, nil
				}
			}
		}
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1}), nil
}

// SecretFromEnv returns the job secret the launcher put in EnvSecret, or
// nil when there is none.
func SecretFromEnv() ([]byte, error) {
	v := os.Getenv(EnvSecret)
	if v == "" {
		return nil, nil
	}
	b, err := hex.DecodeString(v)
	if err != nil || len(b) < 16 {
		return nil, fmt.Errorf("wire: %s: want at least 16 bytes in hex", EnvSecret)
	}
	return b, nil
}
