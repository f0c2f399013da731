package doctor

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMemAvailable(t *testing.T) {
	cases := []struct {
		name    string
		meminfo string
		want    uint64
		wantErr bool
	}{
		{"linux", "MemTotal:       65758652 kB\nMemFree:         1234 kB\nMemAvailable:   40000000 kB\n", 40000000 << 10, false},
		{"missing", "MemTotal:       65758652 kB\n", 0, true},
		{"no unit", "MemAvailable:   40000000\n", 0, true},
		{"not a number", "MemAvailable:   lots kB\n", 0, true},
		{"absurd", "MemAvailable:   99999999999999999999 kB\n", 0, true},
		{"empty", "", 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMemAvailable([]byte(tc.meminfo))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseMemAvailable = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func FuzzParseMemAvailable(f *testing.F) {
	f.Add([]byte("MemTotal: 1 kB\nMemAvailable: 2 kB\n"))
	f.Add([]byte("MemAvailable:"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseMemAvailable(data)
		if err == nil && got%1024 != 0 {
			t.Errorf("parseMemAvailable(%q) = %d, not whole KiB", data, got)
		}
	})
}

func TestHostMemAvailable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(path, []byte("MemAvailable:   2048 kB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := (HostSystem{MeminfoPath: path}).MemAvailable(); err != nil || got != 2<<20 {
		t.Errorf("MemAvailable = %d, %v; want 2 MiB", got, err)
	}
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("skipping the real /proc/meminfo: ", err)
	}
	if got, err := (HostSystem{}).MemAvailable(); err != nil || got == 0 {
		t.Errorf("MemAvailable of this host = %d, %v", got, err)
	}
}

func TestHostDiskFree(t *testing.T) {
	dir := t.TempDir()
	free, err := HostSystem{}.DiskFree(dir)
	if err != nil || free == 0 {
		t.Fatalf("DiskFree(%s) = %d, %v", dir, free, err)
	}
	// A cache not created yet is measured at its nearest existing parent.
	if got, err := (HostSystem{}).DiskFree(filepath.Join(dir, "not", "yet")); err != nil || got == 0 {
		t.Errorf("DiskFree of a missing directory = %d, %v; want its parent's", got, err)
	}
}

func TestHostProbeWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := (HostSystem{}).ProbeWrite(dir); err != nil {
		t.Fatalf("ProbeWrite(%s): %v", dir, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("ProbeWrite left %d files behind", len(entries))
	}
	// A directory under a regular file cannot be made, even by root.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (HostSystem{}).ProbeWrite(filepath.Join(file, "data")); err == nil {
		t.Error("ProbeWrite under a regular file succeeded")
	}
}

func TestHostListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := (HostSystem{}).Listen(ln.Addr().String()); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("Listen on a taken port: %v, want address already in use", err)
	}
	if err := (HostSystem{}).Listen("127.0.0.1:0"); err != nil {
		t.Errorf("Listen on a free port: %v", err)
	}
}

func TestHostMulticast(t *testing.T) {
	names, err := HostSystem{}.MulticastInterfaces()
	t.Logf("multicast interfaces %v, join error %v", names, err)
	for _, n := range names {
		ifc, ierr := net.InterfaceByName(n)
		if ierr != nil {
			t.Fatal(ierr)
		}
		if ifc.Flags&net.FlagLoopback != 0 || ifc.Flags&net.FlagMulticast == 0 || ifc.Flags&net.FlagUp == 0 {
			t.Errorf("%s listed, flags %v", n, ifc.Flags)
		}
	}
	if len(names) == 0 && err != nil {
		t.Errorf("no interface, yet a join error: %v", err)
	}
}
