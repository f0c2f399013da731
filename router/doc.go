// Package router decides which worker serves each request.
//
// It ingests the engines' KV-cache events, keeps an index of which worker
// holds which blocks (and in which tier), tracks the load of active requests
// per worker and scores every candidate with a routing policy. It must not
// talk HTTP to clients or engines; the gateway in package api does that and
// reports back first tokens and completions.
package router
