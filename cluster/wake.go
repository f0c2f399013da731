package cluster

import (
	"context"
	"fmt"
	"net"
	"syscall"
)

// DefaultWakeAddr is where a Wake-on-LAN magic packet goes when no address
// is named: the LAN's broadcast, on the discard port that network cards
// listen on by convention.
const DefaultWakeAddr = "255.255.255.255:9"

// ParseWakeMAC reads the MAC address of a machine to wake: six bytes, as
// net.ParseMAC writes them ("a8:a1:59:00:00:01", "a8-a1-59-00-00-01").
func ParseWakeMAC(s string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(s)
	if err != nil {
		return nil, fmt.Errorf("cluster: wake: %w", err)
	}
	if len(mac) != 6 {
		return nil, fmt.Errorf("cluster: wake: %q is not a six-byte Ethernet address", s)
	}
	return mac, nil
}

// MagicPacket is the Wake-on-LAN payload for mac: six 0xFF bytes, then
// the address sixteen times (102 bytes). A sleeping machine's network
// card that finds it in any frame powers the machine on.
func MagicPacket(mac net.HardwareAddr) []byte {
	out := make([]byte, 0, 6+16*len(mac))
	for range 6 {
		out = append(out, 0xff)
	}
	for range 16 {
		out = append(out, mac...)
	}
	return out
}

// Wake sends mac's magic packet over UDP to addr (host:port; "" for
// DefaultWakeAddr), broadcast allowed.
func Wake(ctx context.Context, mac net.HardwareAddr, addr string) error {
	if addr == "" {
		addr = DefaultWakeAddr
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	conn, err := lc.ListenPacket(ctx, "udp4", ":0")
	if err != nil {
		return fmt.Errorf("cluster: wake %s: %w", mac, err)
	}
	defer conn.Close()
	to, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		return fmt.Errorf("cluster: wake %s: %w", mac, err)
	}
	if _, err := conn.WriteTo(MagicPacket(mac), to); err != nil {
		return fmt.Errorf("cluster: wake %s at %s: %w", mac, addr, err)
	}
	return nil
}
