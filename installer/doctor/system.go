package doctor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// System reads the host: disks, memory, ports, network interfaces and
// directories.
type System interface {
	// DiskFree is the space free to this user on the file system holding
	// path, or its nearest existing parent (a cache not created yet).
	DiskFree(path string) (uint64, error)
	// MemAvailable is the host memory available to new programs
	// (/proc/meminfo's MemAvailable).
	MemAvailable() (uint64, error)
	// Listen reports whether a TCP listener can be opened on addr, closing
	// it at once.
	Listen(addr string) error
	// MulticastInterfaces names the up, non-loopback interfaces that
	// support multicast, and says whether joining the mDNS group
	// 224.0.0.251 on the first of them worked (joinErr nil).
	MulticastInterfaces() (names []string, joinErr error)
	// ProbeWrite creates dir if needed, then creates, syncs and removes a
	// file in it.
	ProbeWrite(dir string) error
}

// HostSystem is the System of the machine the process runs on.
type HostSystem struct {
	// MeminfoPath is read for MemAvailable; "" is /proc/meminfo.
	MeminfoPath string
}

var _ System = HostSystem{}

// DiskFree implements System.
func (HostSystem) DiskFree(path string) (uint64, error) {
	p := filepath.Clean(path)
	for {
		_, err := os.Stat(p)
		if err == nil {
			return statfsFree(p)
		}
		parent := filepath.Dir(p)
		if !errors.Is(err, os.ErrNotExist) || parent == p {
			return 0, fmt.Errorf("disk free at %s: %w", path, err)
		}
		p = parent
	}
}

// MemAvailable implements System.
func (h HostSystem) MemAvailable() (uint64, error) { return h.meminfo("MemAvailable") }

// MemTotal is the host's memory (/proc/meminfo's MemTotal).
func (h HostSystem) MemTotal() (uint64, error) { return h.meminfo("MemTotal") }

func (h HostSystem) meminfo(key string) (uint64, error) {
	path := h.MeminfoPath
	if path == "" {
		path = "/proc/meminfo"
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("host memory: %w", err)
	}
	return parseMeminfo(data, key)
}

// parseMemAvailable reads MemAvailable from /proc/meminfo's text
// ("MemAvailable:   12345678 kB").
func parseMemAvailable(meminfo []byte) (uint64, error) { return parseMeminfo(meminfo, "MemAvailable") }

// parseMeminfo reads one field of /proc/meminfo's text, in bytes.
func parseMeminfo(meminfo []byte, field string) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || key != field {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("host memory: %s: unexpected %q", field, strings.TrimSpace(rest))
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil || kb > 1<<53 {
			return 0, fmt.Errorf("host memory: %s: unexpected %q", field, fields[0])
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("host memory: no %s in /proc/meminfo", field)
}

// Listen implements System.
func (HostSystem) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ln.Close()
}

// mdnsGroup is the multicast group of mDNS, which LAN discovery uses.
var mdnsGroup = &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251)}

// MulticastInterfaces implements System.
func (HostSystem) MulticastInterfaces() ([]string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("network interfaces: %w", err)
	}
	var names []string
	var first *net.Interface
	for i, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 || ifc.Flags&net.FlagMulticast == 0 {
			continue
		}
		if first == nil {
			first = &ifaces[i]
		}
		names = append(names, ifc.Name)
	}
	if first == nil {
		return nil, nil
	}
	conn, err := net.ListenMulticastUDP("udp4", first, mdnsGroup)
	if err != nil {
		return names, fmt.Errorf("joining %s on %s: %w", mdnsGroup.IP, first.Name, err)
	}
	return names, conn.Close()
}

// ProbeWrite implements System.
func (HostSystem) ProbeWrite(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".hearth-doctor-*")
	if err != nil {
		return err
	}
	name := f.Name()
	_, werr := f.WriteString("hearth doctor\n")
	serr := f.Sync()
	cerr := f.Close()
	rerr := os.Remove(name)
	return errors.Join(werr, serr, cerr, rerr)
}
