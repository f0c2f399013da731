package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/atomicfile"
	"github.com/hearth-llm/hearth/installer/doctor"
)

// AdminClient is the admin API's client of the daemon at addr (its base
// URL) with the data directory data, as the command line uses it: with
// key, else no key; over https it trusts Hearth's own CA there besides the
// system's roots, and without a key it sends the daemon's local token,
// which proves that its user, not a web page, asks, when addr is the
// loopback address the daemon recorded beside the token (DataDir.LocalAddr):
// never to another host, nor to another port of this one, where another
// local user could listen.
func AdminClient(addr, key string, data DataDir) (*adminapi.Client, error) {
	hc := http.DefaultClient
	if strings.HasPrefix(addr, "https://") {
		var err error
		if hc, err = adminapi.HTTPClientTrusting(data.TLSCA()); err != nil {
			return nil, err
		}
	}
	c, err := adminapi.NewClient(addr, key, hc)
	if err != nil {
		return nil, fmt.Errorf("%w: --addr: %v", ErrUsage, err)
	}
	if key == "" && loopbackURL(addr) && isLocalAddr(data, addr) {
		token, err := adminapi.ReadLocalToken(data.LocalToken())
		if err != nil {
			return nil, err
		}
		c.SetLocalToken(token)
	}
	return c, nil
}

// isLocalAddr reports whether addr is the address the daemon of data
// recorded (writeLocalAddr): same scheme, host and port. Another local
// user may listen on any other loopback port; no record, no match.
func isLocalAddr(data DataDir, addr string) bool {
	b, err := os.ReadFile(data.LocalAddr())
	if err != nil {
		return false
	}
	want, err := url.Parse(strings.TrimSpace(string(b)))
	if err != nil {
		return false
	}
	got, err := url.Parse(addr)
	if err != nil {
		return false
	}
	return strings.EqualFold(got.Scheme, want.Scheme) && strings.EqualFold(got.Hostname(), want.Hostname()) &&
		urlPort(got) == urlPort(want)
}

// urlPort is a URL's port, the scheme's default when it names none.
func urlPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// writeLocalAddr records base, the URL at which the command line on this
// machine reaches the daemon, beside its local token (DataDir.LocalAddr).
func writeLocalAddr(data DataDir, base string) error {
	if err := atomicfile.Write(data.LocalAddr(), []byte(base+"\n"), 0o600); err != nil {
		return fmt.Errorf("the daemon's local address: %w", err)
	}
	return nil
}

// loopbackURL reports an address on this machine.
func loopbackURL(addr string) bool {
	u, err := url.Parse(addr)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LocalAddr is where a client on this machine reaches a daemon that
// listens on listen (host:port): the loopback address for an unspecified
// host.
func LocalAddr(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("listen address %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// LocalHealth is the URL of the daemon's /health as a client on this
// machine reaches it (LocalAddr), and the HTTP client to poll it with:
// over HTTPS when the daemon serves TLS, trusting only the certificates
// of --tls-cert or Hearth's own CA (--tls auto), read at path(file) (the
// installer's root puts files elsewhere).
func (cfg Config) LocalHealth(path func(string) string) (string, *http.Client, error) {
	addr, err := LocalAddr(cfg.Listen)
	if err != nil {
		return "", nil, err
	}
	trust := cfg.TLSCert
	if cfg.TLS == TLSAuto && trust == "" {
		trust = cfg.Data().TLSCA()
	}
	if trust == "" {
		return "http://" + addr + "/health", nil, nil
	}
	pem, err := os.ReadFile(path(trust))
	if err != nil {
		return "", nil, fmt.Errorf("the certificates to trust for the health check: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return "", nil, fmt.Errorf("no certificate in %s", trust)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	return "https://" + addr + "/health", client, nil
}

// runningSelfChecks reads the engines' start-up self-checks of a daemon
// serving plain HTTP at listen on this machine, through the admin API and
// the daemon's local token; no daemon there, no checks.
type runningSelfChecks struct {
	listen string
	data   DataDir
}

func (d runningSelfChecks) engines(ctx context.Context) ([]adminapi.Engine, error) {
	addr, err := LocalAddr(d.listen)
	if err != nil {
		return nil, err
	}
	c, err := AdminClient("http://"+addr, "", d.data)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	list, err := c.Engines(ctx)
	if err != nil {
		return nil, err
	}
	return list.Engines, nil
}

func (d runningSelfChecks) EngineKVEvents(ctx context.Context) ([]doctor.EngineKVEvents, error) {
	engines, err := d.engines(ctx)
	if err != nil {
		return nil, err
	}
	var out []doctor.EngineKVEvents
	for _, e := range engines {
		if e.KVEvents != nil {
			out = append(out, doctor.EngineKVEvents{Engine: e.Name, State: e.KVEvents.State, Summary: e.KVEvents.Summary})
		}
	}
	return out, nil
}

func (d runningSelfChecks) EngineTokenizers(ctx context.Context) ([]doctor.EngineTokenizer, error) {
	engines, err := d.engines(ctx)
	if err != nil {
		return nil, err
	}
	var out []doctor.EngineTokenizer
	for _, e := range engines {
		if e.Tokenizer != nil {
			out = append(out, doctor.EngineTokenizer{Engine: e.Name, State: e.Tokenizer.State, Summary: e.Tokenizer.Summary})
		}
	}
	return out, nil
}

// localBaseURL is the base URL at which a client on this machine reaches
// the daemon listening on addr (LocalAddr, in the daemon's scheme).
func (cfg Config) localBaseURL(addr string) string {
	if local, err := LocalAddr(addr); err == nil {
		addr = local
	}
	return cfg.Scheme() + "://" + addr
}
