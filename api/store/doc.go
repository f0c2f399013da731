// Package store is Hearth's SQLite database (hearth.db under the data
// directory): what must survive a restart.
//
// It keeps the Responses-API answers the gateway was asked to store
// (store: true), so that a later request can continue a conversation
// through previous_response_id without resending it; the API keys
// created in the console, as SHA-256 digests of their secrets; and the
// settings saved in the console. Opening a database creates the tables it
// lacks, so an older file keeps working. The live keys are also held in
// memory, indexed by digest, because every API request checks one.
//
// Stored conversations do not pile up: RunRetention removes those older
// than a week and, oldest first, those beyond 256 MiB together (Retention
// changes both), at start and every ten minutes of its clock. The file is
// created readable by its owner only (0600), as are its WAL files.
//
// It must not know HTTP or the shapes of any client protocol (a response
// is an id, a model name and an opaque conversation blob), nor what makes
// a routing policy or a model alias valid: callers check settings before
// saving them.
package store
