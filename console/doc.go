// Package console is the browser console: server-rendered pages (templ
// components, htmx 4) that show which GPUs Hearth found, how full each
// engine's KV cache is and how full the tiers below it are (host RAM, the
// node's SSD store, with where prompt tokens were loaded from), what each
// node's SSD store holds, what holds each GPU's memory (Hearth, other
// programs) with its utilisation, temperature and power over the last
// minutes, which GPU the driver lost, how often requests hit the KV cache,
// where a loading engine's start is and why a failed one failed, which
// models served on demand are resident on each GPU with a timeline of their
// loads, wakes, sleeps and stops, which
// agent sessions run where, and why the router sent each request where it
// did; plus the Connect page (client settings, API keys), Settings, Health
// (the host checks of hearth doctor), and Cluster: the LAN cluster's nodes
// with their state, GPUs and engines and this node's links to them, and
// for the owner the join token, revoking a node and answering machines
// that ask to join.
//
// It owns the pages, their handlers, the live updates and the console's
// login. It reads the rest of Hearth only through the small interfaces it
// declares in sources.go (EngineSource, RouterSource, TrafficSource,
// KVStoreSource, ModelSource, KeyStore, SettingsStore, HealthSource,
// ClusterSource),
// with types shaped for display; the daemon adapts router, runtime, nodes,
// cluster and api to them. It must not import those packages, and it must
// never block what it observes.
//
// Live pages hold one SSE stream each. A Hub samples the sources every
// Config.Interval on an injected clock, renders each watched page's live
// fragment once, and offers the frame to every subscriber's bounded buffer;
// a browser that falls behind loses updates (counted in HubStats), never
// the producer's time. Heartbeats make a vanished browser's stream fail on
// write and end, and a write deadline ends the stream of a browser that
// holds its connection but stopped reading. Streams need Run: without it
// nothing is pushed (pages still render, sampled on demand).
//
// A live fragment is the same for every browser watching it, so it holds
// nothing one browser may see and another may not: the Cluster page's join
// token is rendered into the owner's page, outside its live part.
//
// Access: once the owner's password is set every page needs a login with
// it; before, when the API requires a key the console requires a login with
// an admin key (an in-memory cookie session); otherwise it answers only
// loopback clients that name a loopback host. Changes to the cluster
// (revoke, accept, reject) need the owner's session whatever the rest
// allows.
package console
