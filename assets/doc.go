// Package assets embeds the static files the console serves (htmx, its SSE
// extension, styles), so the binary needs no CDN and no Node toolchain.
package assets
