// Package watch streams resource events from the NO8S_EVENTS JetStream stream
// to HTTP clients as Server-Sent Events, resumable from any retained revision.
//
// # Model
//
// One Hub per gateway follows the whole stream with a single ephemeral
// consumer, decodes each event once, renders its SSE frame once and fans it
// out to the live watchers whose filter matches, each through a bounded
// channel. A watcher that resumes from an older revision first catches up from
// the stream itself with its own short-lived consumer (filtered by subject
// server-side), and joins the hub's fan-out once it has reached the hub's
// position. Stream sequences make the hand-over exact: a watcher registers
// with the hub at sequence H, reads the stream until it has covered H, and
// then skips every fanned-out event it has already seen. Revisions are
// checked too, so no event is ever sent twice.
//
// # Back-pressure
//
// The hub never blocks on a watcher. When a watcher's channel is full (it
// reads slower than events arrive), the hub drops it from the fan-out and
// records the first sequence it did not deliver; the watcher drains what it
// has and catches up from the stream from there, at its own pace, then joins
// again. Gateway memory per watcher is therefore bounded by its channel
// (Config.Buffer shared, already-rendered events) and its catch-up consumer's
// pull batch, whatever the client's speed, and a slow watcher costs the other
// watchers nothing.
//
// A client that stops reading altogether is disconnected: when one write to it
// blocks longer than Config.StallTimeout, the watch ends with a final
//
//	event: ERROR
//	data: {"event_type":"ERROR","code":"too_slow","detail":"..."}
//
// which the client reads once it reads again (it then resumes with
// Last-Event-ID), and a write blocked longer than Config.WriteTimeout closes
// the connection outright. Counters of both outcomes are in Stats.
//
// # Resume points
//
// Every event's SSE id is its revision. A watch resumes after revision R
// (Last-Event-ID or ?since=R): Resolve finds the first stream sequence whose
// revision is above R by binary search over the stream (revisions increase
// with sequence). While the stream's first sequence is 1, nothing has ever
// been removed and every R is resumable. Once events have expired,
// revisions being sparse, R is resumable only when R >= rev(first retained
// message) - 1: every event after R then lies in the retained part.
// Otherwise Resolve answers a *GoneError (HTTP 410): events between R and
// the oldest retained one may have expired, and the client must list again.
// On a stream whose events have all expired, the store's published revision
// (every event up to it was published, and is gone) stands in for the first
// retained revision. A start point that expires while a watcher catches up
// ends the watch with a final ERROR event with code "gone".
package watch
