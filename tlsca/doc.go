// Package tlsca keeps a node's own certificate authority and the server
// certificate it issues, so that `hearth up --tls auto` can serve HTTPS on
// a LAN without a public CA.
//
// Contract: the CA (ECDSA P-256, ten years) lives in a directory as
// ca.pem and ca-key.pem (mode 0600) and is made once; LoadOrCreate returns
// the same CA on every later start, so clients trust it once. The server
// certificate (ECDSA P-256, the key type every TLS client accepts) is kept
// next to it as server.pem and server-key.pem and issued again when the
// names it must cover change or when it is within a month of expiry.
// Each certificate is written with its key as one set (pki.WriteSet), so a
// crash never leaves a key beside a certificate it does not belong to; keys,
// serials and PEM come from pki too. Nothing here listens or knows HTTP;
// the caller wraps its listener.
package tlsca
