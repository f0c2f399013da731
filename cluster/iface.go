package cluster

import (
	"net"
	"strings"
)

// LANAddrs lists the IPv4 addresses of the interfaces mDNS and the
// advertised addresses use: up, multicast-capable, and neither loopback
// nor a container or virtual bridge (docker0, br-*, veth*, virbr*,
// cni*, flannel*), unless only names one interface to use.
func LANAddrs(only string) []net.IP {
	var out []net.IP
	for _, ifc := range LANInterfaces(only) {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLinkLocalUnicast() {
				out = append(out, ipn.IP.To4())
			}
		}
	}
	return out
}

// LANInterfaces lists the interfaces LANAddrs reads.
func LANInterfaces(only string) []net.Interface {
	ifcs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []net.Interface
	for _, ifc := range ifcs {
		if only != "" {
			if ifc.Name == only {
				out = append(out, ifc)
			}
			continue
		}
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 || ifc.Flags&net.FlagMulticast == 0 || virtualInterface(ifc.Name) {
			continue
		}
		out = append(out, ifc)
	}
	return out
}

func virtualInterface(name string) bool {
	for _, p := range []string{"docker", "br-", "veth", "virbr", "cni", "flannel", "cali", "vxlan", "tun", "tap", "lxc", "podman", "tailscale", "zt"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
