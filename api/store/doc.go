// Package store keeps the Responses-API answers the gateway was asked to
// store (store: true), so that a later request can continue a conversation
// through previous_response_id without resending it.
//
// It owns one SQLite table and nothing else; it must not know HTTP or the
// shapes of any client protocol: a response is an id, a model name and an
// opaque conversation blob.
package store
