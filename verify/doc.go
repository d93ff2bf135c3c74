// Package verify lets a webhook receiver check that a request came from
// Herald: Sign and Verify for both signature schemes Herald sends (Standard
// Webhooks and the hex hmac-sha256 style), in constant time and with a
// timestamp tolerance against replays, and net/http middleware that verifies
// each request and drops duplicates by webhook id. It uses the standard
// library only, so receivers can import it without pulling in Herald.
package verify
