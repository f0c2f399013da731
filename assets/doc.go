// Package assets embeds the static files the console serves, so the binary
// needs no CDN and no Node toolchain:
//
//   - static/htmx.min.js and static/hx-sse.min.js: htmx 4.0.1 and its SSE
//     extension, unmodified, under the licence in static/htmx-LICENSE
//     (Zero-Clause BSD);
//   - static/console.css, static/console.js and static/favicon.svg: the
//     console's own styles, its copy buttons and its icon.
//
// It owns nothing else and imports only the standard library.
package assets
