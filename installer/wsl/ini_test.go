package wsl

import "testing"

func TestINIValue(t *testing.T) {
	t.Parallel()
	conf := []byte("# WSL settings\n[wsl2]\nmemory = 48GB\nnetworkingMode = \"mirrored\" ; comment\n[experimental]\nnetworkingMode=nat\n")
	if got := iniValue(conf, "WSL2", "networkingmode"); got != "mirrored" {
		t.Errorf("networkingMode = %q", got)
	}
	if got := iniValue(conf, "wsl2", "firewall"); got != "" {
		t.Errorf("firewall = %q, want absent", got)
	}
}

// FuzzINIValue feeds .wslconfig and wsl.conf text, which Windows users
// write by hand, to the parser: it must not panic, and a value never
// spans lines.
func FuzzINIValue(f *testing.F) {
	f.Add([]byte("[wsl2]\nnetworkingMode=mirrored\n"), "wsl2", "networkingMode")
	f.Add([]byte("[boot]\r\nsystemd = true # on\r\n"), "boot", "systemd")
	f.Add([]byte("[\n=\n]=[\n"), "", "")
	f.Fuzz(func(t *testing.T, conf []byte, section, key string) {
		if v := iniValue(conf, section, key); len(v) > len(conf) {
			t.Fatalf("value %q longer than the file", v)
		}
	})
}
