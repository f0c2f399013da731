package pki

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// pair makes a self-signed certificate named cn and its key, in PEM.
func pair(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := NewEd25519Key()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: Serial(), Subject: pkix.Name{CommonName: cn}, NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err = EncodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return EncodeCert(der), keyPEM
}

func readPair(t *testing.T, dir string) string {
	t.Helper()
	if err := Recover(dir); err != nil {
		t.Fatal(err)
	}
	c, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	k, _ := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	cert, _, err := ParsePair(c, k)
	if err != nil {
		t.Fatalf("the set on disk is torn: %v", err)
	}
	return cert.Subject.CommonName
}

func writePair(dir string, certPEM, keyPEM []byte) error {
	return WriteSet(dir, File{Name: "ca-key.pem", Data: keyPEM, Mode: 0o600}, File{Name: "ca.pem", Data: certPEM, Mode: 0o644})
}

func TestWriteSetKeepsModesAndLeavesNothingBehind(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	c, k := pair(t, "old")
	if err := writePair(dir, c, k); err != nil {
		t.Fatal(err)
	}
	if got := readPair(t, dir); got != "old" {
		t.Fatalf("read %q", got)
	}
	for name, want := range map[string]os.FileMode{"ca-key.pem": 0o600, "ca.pem": 0o644, ".": 0o700} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", name, st.Mode().Perm(), want)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("directory holds %d entries, want the 2 files: %v", len(ents), ents)
	}
}

// A write that fails before the set is committed leaves the old set, and
// no staged file.
func TestWriteSetFailingBeforeCommitKeepsTheOldSet(t *testing.T) {
	dir := t.TempDir()
	c, k := pair(t, "old")
	if err := writePair(dir, c, k); err != nil {
		t.Fatal(err)
	}
	// The certificate cannot be staged: its staged name is taken by a
	// directory. The key was staged already.
	if err := os.Mkdir(filepath.Join(dir, stagedName("ca.pem")), 0o700); err != nil {
		t.Fatal(err)
	}
	c2, k2 := pair(t, "new")
	if err := writePair(dir, c2, k2); err == nil {
		t.Fatal("the write succeeded")
	}
	if got := readPair(t, dir); got != "old" {
		t.Fatalf("after a failed write the set is %q, want the old", got)
	}
	if _, err := os.Stat(filepath.Join(dir, stagedName("ca-key.pem"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the staged key was left behind: %v", err)
	}
}

// A write that stops after the commit, with one file in place and one
// not (a crash between the renames), is finished by the next reader: it
// finds the whole new set, never the new key beside the old certificate.
func TestWriteSetStoppedAfterCommitIsFinishedByRecover(t *testing.T) {
	dir := t.TempDir()
	c, k := pair(t, "old")
	if err := writePair(dir, c, k); err != nil {
		t.Fatal(err)
	}
	renames := 0
	renameStaged = func(from, to string) error {
		if renames++; renames > 1 {
			return errors.New("crash")
		}
		return os.Rename(from, to)
	}
	c2, k2 := pair(t, "new")
	err := writePair(dir, c2, k2)
	renameStaged = os.Rename
	if err == nil {
		t.Fatal("the write succeeded")
	}
	// Torn on disk right now: the new key beside the old certificate.
	onDisk, _ := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	if !bytes.Equal(onDisk, k2) {
		t.Fatal("the test did not stop the write between the renames")
	}
	if got := readPair(t, dir); got != "new" {
		t.Fatalf("after recovery the set is %q, want the new", got)
	}
	if _, err := os.Stat(filepath.Join(dir, journalName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the journal is still there: %v", err)
	}
}

func TestParsePairRefusesAnotherKey(t *testing.T) {
	c, _ := pair(t, "a")
	_, k := pair(t, "b")
	if _, _, err := ParsePair(c, k); !errors.Is(err, ErrKeyMismatch) {
		t.Fatalf("ParsePair with another key: %v, want ErrKeyMismatch", err)
	}
	ec, err := NewECDSAKey()
	if err != nil {
		t.Fatal(err)
	}
	ecPEM, _ := EncodeKey(ec)
	if _, err := ParseKey(ecPEM); err != nil {
		t.Errorf("an ECDSA key does not parse back: %v", err)
	}
}

func TestParseKeyRefusesOtherKeys(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("not pem"), []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")} {
		if _, err := ParseKey(b); err == nil {
			t.Errorf("ParseKey(%q) accepted", b)
		}
	}
}

func TestSerialIsPositiveAndFits(t *testing.T) {
	for range 100 {
		s := Serial()
		if s.Sign() <= 0 || s.BitLen() > 127 {
			t.Fatalf("serial %v", s)
		}
	}
}

func TestWriteSetRefusesPaths(t *testing.T) {
	for _, name := range []string{"", "../x", "a/b", journalName} {
		if err := WriteSet(t.TempDir(), File{Name: name, Data: nil, Mode: 0o600}); err == nil {
			t.Errorf("WriteSet accepted the name %q", name)
		}
	}
}
