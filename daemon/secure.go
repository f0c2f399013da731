package daemon

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/tlsca"
)

// Values of --tls.
const (
	TLSOff  = "off"
	TLSAuto = "auto"
)

// listensOnLoopback reports whether an address of --listen (host:port)
// reaches only this machine. An empty host, 0.0.0.0, :: and any name but
// localhost count as beyond it: a name may resolve to a LAN address.
func listensOnLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkExposureFlags refuses a listen address beyond loopback that would
// serve plain HTTP without --insecure-lan: keys and console passwords
// would cross the LAN in clear text.
func checkExposureFlags(cfg Config) error {
	if cfg.TLS != TLSOff && cfg.TLS != TLSAuto {
		return fmt.Errorf("%w: unknown --tls %q (known: off, auto; or give --tls-cert and --tls-key)", ErrUsage, cfg.TLS)
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return fmt.Errorf("%w: --tls-cert and --tls-key go together", ErrUsage)
	}
	if cfg.TLSCert != "" && cfg.TLS == TLSAuto {
		return fmt.Errorf("%w: --tls auto makes its own certificate: drop it or drop --tls-cert/--tls-key", ErrUsage)
	}
	if listensOnLoopback(cfg.Listen) || cfg.ServesTLS() || cfg.InsecureLAN {
		return nil
	}
	return fmt.Errorf("%w: --listen %s reaches beyond this machine, and plain HTTP would carry API keys and console passwords in clear: "+
		"add --tls auto (Hearth makes its own CA and prints how clients trust it), or --tls-cert FILE --tls-key FILE for a certificate of your own; "+
		"--insecure-lan serves plain HTTP anyway", ErrUsage, cfg.Listen)
}

// checkExposureKeys refuses to serve beyond loopback while no API key
// exists: anyone on the network could use the GPUs. Keys are those of the
// command line and those kept in the database (storedKeys).
func checkExposureKeys(cfg Config, addr net.Addr, storedKeys bool) error {
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
		return nil
	}
	if len(cfg.APIKeys) > 0 || storedKeys {
		return nil
	}
	return fmt.Errorf("%w: --listen %s reaches beyond this machine but no API key is set, so anyone on the network could use it: "+
		"pass --api-key SECRET (or $%s=SECRET1,SECRET2), or start once on 127.0.0.1, create a key on the console's Connect page and start again",
		ErrUsage, cfg.Listen, ServerKeysEnv)
}

// ServesTLS reports whether the API is served over TLS.
func (cfg Config) ServesTLS() bool { return cfg.TLS == TLSAuto || cfg.TLSCert != "" }

// Scheme is the URL scheme clients use.
func (cfg Config) Scheme() string {
	if cfg.ServesTLS() {
		return "https"
	}
	return "http"
}

// serverTLS builds the TLS configuration of the API: the user's
// certificate, or one issued by the node's CA under the data directory
// (nil ca then). It returns nil when TLS is off.
func serverTLS(cfg Config, listenAddr net.Addr, now time.Time) (*tls.Config, *tlsca.Authority, error) {
	switch {
	case cfg.TLSCert != "":
		cert, err := tlsca.LoadKeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, nil, fmt.Errorf("up: --tls-cert: %w", err)
		}
		return tlsca.ServerConfig(cert), nil, nil
	case cfg.TLS != TLSAuto:
		return nil, nil, nil
	}
	host, _ := os.Hostname()
	ca, err := tlsca.LoadOrCreate(cfg.Data().TLS(), host, now)
	if err != nil {
		return nil, nil, fmt.Errorf("up: %w", err)
	}
	addrs := lanAddresses()
	if tcp, ok := listenAddr.(*net.TCPAddr); ok && !tcp.IP.IsUnspecified() {
		addrs = append(addrs, tcp.IP)
	}
	cert, err := ca.ServerCertificate(tlsca.LocalNames(host, addrs), now)
	if err != nil {
		return nil, nil, fmt.Errorf("up: %w", err)
	}
	return tlsca.ServerConfig(cert), ca, nil
}

// lanAddresses lists this machine's addresses on its interfaces that are
// up, loopback aside (LocalNames adds it).
func lanAddresses() []net.IP {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []net.IP
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				out = append(out, n.IP)
			}
		}
	}
	return out
}

// printTrust tells how each client trusts the node's CA. Claude Code and
// OpenCode run on Node.js or Bun, which add NODE_EXTRA_CA_CERTS to their
// built-in roots; Codex reads CODEX_CA_CERTIFICATE, else SSL_CERT_FILE
// (which then replaces the system roots for it).
func printTrust(w io.Writer, ca *tlsca.Authority) {
	p := ca.CertPath()
	fmt.Fprintf(w, "TLS: certificates issued by Hearth's own CA\n"+
		"  CA certificate: %[1]s\n"+
		"  SHA-256 fingerprint: %[2]s\n"+
		"  (compare it with the one a client machine received before trusting it)\n"+
		"Trusting the CA on a client machine (copy ca.pem there first):\n"+
		"  Claude Code:  export NODE_EXTRA_CA_CERTS=%[1]s\n"+
		"  OpenCode:     export NODE_EXTRA_CA_CERTS=%[1]s\n"+
		"  Codex:        export CODEX_CA_CERTIFICATE=%[1]s   (older versions: SSL_CERT_FILE=%[1]s)\n"+
		"  curl:         curl --cacert %[1]s …\n\n", p, ca.Fingerprint())
}

// printSetupToken shows the token that sets the console owner's password;
// it is printed only here, on the terminal of whoever started the daemon.
func printSetupToken(w io.Writer, baseURL, token string) {
	fmt.Fprintf(w, "Console setup: no owner password is set yet. Open %s/console/setup and enter\n"+
		"  setup token: %s\n"+
		"to choose the password that opens the console from then on (on this machine too).\n\n", baseURL, token)
}

// advertisedAddr is the address printed for clients: a listener on every
// interface (0.0.0.0, ::) is reached by the host's name, which the
// certificate of --tls auto covers; others as they are.
func advertisedAddr(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return addr.String()
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return addr.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}
