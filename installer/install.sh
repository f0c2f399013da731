#!/bin/sh
# Installs Hearth: fetches the hearth binary for this machine, then runs
# "hearth install" with this script's arguments.
#
#   curl -fsSL "$HEARTH_RELEASE_BASE/install.sh" | sh
#   curl -fsSL "$HEARTH_RELEASE_BASE/install.sh" | sh -s -- --dry-run
#
# Where the binary comes from, first that works:
#   HEARTH_ARCHIVE_URL   a release archive (.tar.gz holding "hearth"):
#                        https://…, file:///… or a local path
#   HEARTH_RELEASE_BASE  where releases are published; the archive is
#                        $HEARTH_RELEASE_BASE/hearth_linux_<arch>.tar.gz,
#                        <arch> amd64 or arm64. This is the project's
#                        release location and must be set: there is no
#                        built-in default.
#   go install           github.com/hearth-llm/hearth/cmd/hearth@$HEARTH_VERSION
#                        (default latest), when Go is installed and no
#                        archive could be fetched.
# An archive is checked against ARCHIVE.sha256 (or SHA256SUMS beside it)
# when one is published; a mismatch stops the install.
set -eu

say() { printf 'hearth-install: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

arch() {
	case "$(uname -m)" in
	x86_64 | amd64) echo amd64 ;;
	aarch64 | arm64) echo arm64 ;;
	*) die "unsupported architecture $(uname -m): releases are built for amd64 and arm64" ;;
	esac
}

# fetch URL FILE: copies a file://, local or http(s) URL into FILE.
fetch() {
	case "$1" in
	file://*) cp "${1#file://}" "$2" 2>/dev/null ;;
	http://* | https://*)
		if command -v curl >/dev/null 2>&1; then
			curl -fsSL -o "$2" "$1"
		elif command -v wget >/dev/null 2>&1; then
			wget -q -O "$2" "$1"
		else
			say "neither curl nor wget to fetch $1"
			return 1
		fi
		;;
	*) cp "$1" "$2" 2>/dev/null ;;
	esac
}

sha256() {
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum "$1" | cut -d' ' -f1
	elif command -v shasum >/dev/null 2>&1; then
		shasum -a 256 "$1" | cut -d' ' -f1
	else
		die "no sha256sum or shasum to check the archive with"
	fi
}

# verify ARCHIVE URL: checks the archive against a published checksum, if
# there is one: URL.sha256 (the sum alone, or "SUM  NAME"), else a
# SHA256SUMS file in the same directory.
verify() {
	name=${2##*/}
	want=""
	if fetch "$2.sha256" "$tmp/sum" 2>/dev/null; then
		want=$(cut -d' ' -f1 <"$tmp/sum")
	elif fetch "${2%/*}/SHA256SUMS" "$tmp/sums" 2>/dev/null; then
		want=$(awk -v n="$name" '$2 == n || $2 == "*" n { print $1 }' "$tmp/sums")
	fi
	if [ -z "$want" ]; then
		say "no checksum published for $name; not verified"
		return 0
	fi
	got=$(sha256 "$1")
	[ "$got" = "$want" ] || die "checksum mismatch for $name: got $got, want $want"
	say "checksum of $name verified"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

a=$(arch)
url=${HEARTH_ARCHIVE_URL:-}
if [ -z "$url" ] && [ -n "${HEARTH_RELEASE_BASE:-}" ]; then
	url="${HEARTH_RELEASE_BASE%/}/hearth_linux_$a.tar.gz"
fi

bin=""
if [ -n "$url" ] && fetch "$url" "$tmp/hearth.tar.gz"; then
	verify "$tmp/hearth.tar.gz" "$url"
	mkdir "$tmp/x"
	tar -xzf "$tmp/hearth.tar.gz" -C "$tmp/x"
	bin=$(find "$tmp/x" -type f -name hearth | head -n 1)
	[ -n "$bin" ] || die "no hearth binary in $url"
	chmod +x "$bin"
	say "fetched $url ($a)"
elif command -v go >/dev/null 2>&1; then
	if [ -n "$url" ]; then
		say "cannot fetch $url; building with go install instead"
	fi
	GOBIN="$tmp/bin" go install "github.com/hearth-llm/hearth/cmd/hearth@${HEARTH_VERSION:-latest}"
	bin="$tmp/bin/hearth"
else
	if [ -n "$url" ]; then
		die "cannot fetch $url, and Go is not installed to build Hearth instead"
	fi
	die "set HEARTH_RELEASE_BASE (where Hearth's releases are published) or HEARTH_ARCHIVE_URL, or install Go"
fi

# Installing for real needs root; a packaging root or a dry run does not.
sudo=""
case " $* " in
*" --root "* | *" --root="* | *" --dry-run "*) ;;
*)
	if [ "$(id -u)" != 0 ]; then
		command -v sudo >/dev/null 2>&1 || die "run as root: hearth install writes /usr/local/bin, /etc and systemd's units"
		sudo=sudo
	fi
	;;
esac
$sudo "$bin" install "$@"
