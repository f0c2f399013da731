package console

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The owner's password is kept as PBKDF2-HMAC-SHA256 (the standard
// library's; OWASP's 2023 figure of 600 000 iterations) with a 16-byte
// salt, encoded as "pbkdf2-sha256$ITERATIONS$SALT$HASH" in unpadded
// base64url. The iteration count travels with the digest, so that a later
// Hearth can raise it and still check old ones.
const (
	passwordScheme     = "pbkdf2-sha256"
	passwordIterations = 600_000
	passwordSaltLen    = 16
	passwordHashLen    = 32
	// MinPasswordLength is the shortest owner password accepted.
	MinPasswordLength = 10
	// maxPasswordLength bounds the work a login form can ask for.
	maxPasswordLength = 1024
	// maxIterations refuses a stored digest that would take minutes to
	// check (a corrupted or hostile row).
	maxIterations = 10_000_000
)

var errBadDigest = errors.New("console: malformed password digest")

// hashPassword returns the digest of password to keep.
func hashPassword(password string, iterations int) (string, error) {
	salt := make([]byte, passwordSaltLen)
	rand.Read(salt) // crypto/rand.Read never fails
	sum, err := pbkdf2.Key(sha256.New, password, salt, iterations, passwordHashLen)
	if err != nil {
		return "", fmt.Errorf("console: hash password: %w", err)
	}
	enc := base64.RawURLEncoding
	return passwordScheme + "$" + strconv.Itoa(iterations) + "$" + enc.EncodeToString(salt) + "$" + enc.EncodeToString(sum), nil
}

// passwordDigest is a parsed stored digest.
type passwordDigest struct {
	iterations int
	salt, sum  []byte
}

// parsePasswordDigest reads what hashPassword wrote.
func parsePasswordDigest(s string) (passwordDigest, error) {
	parts := strings.Split(s, "$")
	if len(parts) != 4 || parts[0] != passwordScheme {
		return passwordDigest{}, errBadDigest
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n < 1 || n > maxIterations || parts[1] != strconv.Itoa(n) {
		return passwordDigest{}, errBadDigest
	}
	enc := base64.RawURLEncoding
	salt, err := enc.DecodeString(parts[2])
	if err != nil || len(salt) < 8 {
		return passwordDigest{}, errBadDigest
	}
	sum, err := enc.DecodeString(parts[3])
	if err != nil || len(sum) != passwordHashLen {
		return passwordDigest{}, errBadDigest
	}
	return passwordDigest{iterations: n, salt: salt, sum: sum}, nil
}

// checkPassword reports whether password matches a stored digest, in time
// that does not depend on where they differ.
func checkPassword(digest, password string) (bool, error) {
	d, err := parsePasswordDigest(digest)
	if err != nil {
		return false, err
	}
	if len(password) > maxPasswordLength {
		return false, nil
	}
	sum, err := pbkdf2.Key(sha256.New, password, d.salt, d.iterations, passwordHashLen)
	if err != nil {
		return false, fmt.Errorf("console: check password: %w", err)
	}
	return subtle.ConstantTimeCompare(sum, d.sum) == 1, nil
}

// validNewPassword says what is wrong with a password the owner chose.
func validNewPassword(password, confirm string) string {
	switch {
	case password != confirm:
		return "The two passwords differ."
	case len([]rune(password)) < MinPasswordLength:
		return fmt.Sprintf("Choose a password of at least %d characters.", MinPasswordLength)
	case len(password) > maxPasswordLength:
		return fmt.Sprintf("Choose a password of at most %d bytes.", maxPasswordLength)
	}
	return ""
}
