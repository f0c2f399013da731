// Package console is the browser console: templ components rendered on the
// server and live fragments pushed over SSE (htmx).
//
// It reads router, runtime and store state through small interfaces it
// declares itself, and must never block the components it observes: every
// subscriber has a bounded buffer, and a slow browser drops updates.
package console
