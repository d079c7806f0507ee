package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// Event is one change of a resource, as a watch delivers it.
type Event struct {
	// Type is EventCreated, EventModified, EventDeleted, EventReconciled
	// or EventPurged.
	Type     string    `json:"type"`
	Revision int64     `json:"revision"`
	Resource *Resource `json:"resource"`
}

// ErrGone means the watch's resume point is older than the retained
// history (410, or an ERROR event with code gone): list again.
var ErrGone = errors.New("the resume point is older than the retained event history")

// WatchHandler receives what a watch delivers. Relisted is called with a
// fresh list when the watch had to start over (the server no longer had
// the history to resume from); Event with every change after it, once, in
// revision order; Progress with human-readable notes (reconnecting, ...).
type WatchHandler struct {
	Relisted func(items []Resource, revision int64) error
	Event    func(Event) error
	Progress func(msg string)
}

// ListAndWatch lists the resources o selects, hands them to listed, then
// watches from the list's revision until ctx ends, resuming after every
// dropped connection from the last revision seen (so no change is missed
// or repeated, across gateway restarts too), and listing again when the
// history to resume from is gone. An event at or below the listed state of
// its resource is skipped (the list may be newer than its revision).
func (c *Client) ListAndWatch(ctx context.Context, o ListOptions, listed func(items []Resource, revision int64) error, h WatchHandler) error {
	progress := h.Progress
	if progress == nil {
		progress = func(string) {}
	}
	var (
		seen  map[int64]int64 // resource id -> resource_version listed
		since int64
	)
	relist := func(first bool) error {
		for attempt := 0; ; attempt++ {
			items, rev, err := c.ListResources(ctx, o)
			if err == nil {
				seen = make(map[int64]int64, len(items))
				for _, it := range items {
					seen[it.ID] = it.ResourceVersion
				}
				since = rev
				if first {
					return listed(items, rev)
				}
				if h.Relisted != nil {
					return h.Relisted(items, rev)
				}
				return nil
			}
			if first || !transient(err) {
				return err
			}
			progress(fmt.Sprintf("list again: %v; retrying", err))
			if err := sleep(ctx, backoff(attempt)); err != nil {
				return err
			}
		}
	}
	if err := relist(true); err != nil {
		return err
	}
	for {
		err := c.follow(ctx, o, &since, func(ev Event) error {
			if ev.Resource != nil && ev.Revision <= seen[ev.Resource.ID] {
				return nil
			}
			return h.Event(ev)
		}, progress)
		if !errors.Is(err, ErrGone) || ctx.Err() != nil {
			return err
		}
		progress(fmt.Sprintf("watch: %v; listing again", err))
		if err := relist(false); err != nil {
			return err
		}
	}
}

// Watch delivers every change o selects after revision since (FromNow:
// from now on), once, in revision order, until ctx ends or handle fails; it reconnects after
// every dropped connection from the last revision seen. It returns an
// error satisfying IsGone when the history to resume from is gone: list
// again (or use ListAndWatch, which does).
func (c *Client) Watch(ctx context.Context, o ListOptions, since int64, handle func(Event) error, progress func(msg string)) error {
	if progress == nil {
		progress = func(string) {}
	}
	return c.follow(ctx, o, &since, handle, progress)
}

// follow reads the stream from *since across reconnects.
func (c *Client) follow(ctx context.Context, o ListOptions, since *int64, handle func(Event) error, progress func(string)) error {
	failures := 0
	for {
		err := c.watchOnce(ctx, o, since, func(ev Event) error {
			failures = 0
			return handle(ev)
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrGone) || (err != nil && !transient(err)) {
			return err
		}
		reason := "the server ended the stream"
		if err != nil {
			reason = err.Error()
		}
		progress(fmt.Sprintf("watch: %s; reconnecting from revision %d", reason, *since))
		if err := sleep(ctx, backoff(failures)); err != nil {
			return err
		}
		failures++
	}
}

// Frame is one server-sent event of a watch stream, undecoded: its name
// (an event type, BOOKMARK or ERROR), its id (the revision) and its data
// (a WatchEvent, WatchBookmark or WatchError document).
type Frame struct {
	Name string
	ID   int64
	// Data is valid until the next call of Stream.Next.
	Data []byte
}

// Stream is one open watch connection (GET /api/v1/events), read frame by
// frame. Watch and ListAndWatch decode the frames and reconnect; a load
// generator reads them raw.
type Stream struct {
	body io.ReadCloser
	rd   *bufio.Reader
	data []byte
	name []byte
}

// FromNow, as a watch's since, asks for the changes from now on only.
const FromNow int64 = -1

// OpenStream opens one watch connection for the changes o selects after
// revision since (FromNow: from now on). A 410 comes back as an error
// satisfying IsGone.
func (c *Client) OpenStream(ctx context.Context, o ListOptions, since int64) (*Stream, error) {
	q := o.query()
	q.Del("limit")
	hdr := http.Header{"Accept": {"text/event-stream"}}
	if since >= 0 {
		q.Set("since", strconv.FormatInt(since, 10))
		hdr.Set("Last-Event-ID", strconv.FormatInt(since, 10))
	}
	resp, err := c.send(ctx, c.stream, request{method: http.MethodGet, path: "/api/v1/events", query: q, header: hdr}, nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		err := decodeError(resp.StatusCode, resp.Header, data)
		if resp.StatusCode == http.StatusGone {
			return nil, fmt.Errorf("%w: %w", ErrGone, err)
		}
		return nil, err
	}
	return &Stream{body: resp.Body, rd: bufio.NewReaderSize(resp.Body, 64<<10)}, nil
}

// Next reads the next frame. It returns io.EOF when the server ended the
// stream cleanly (a gateway shutting down says so) and an error wrapping
// io.ErrUnexpectedEOF when the connection dropped.
func (s *Stream) Next() (Frame, error) {
	s.data, s.name = s.data[:0], s.name[:0]
	var id int64
	for {
		line, err := s.rd.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			rest, rerr := s.rd.ReadBytes('\n')
			line, err = append(append([]byte(nil), line...), rest...), rerr
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return Frame{}, fmt.Errorf("connection closed: %w", io.ErrUnexpectedEOF)
			}
			return Frame{}, fmt.Errorf("read the event stream: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > 0 {
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				s.name = append(s.name[:0], value...)
			case "id":
				id, _ = strconv.ParseInt(string(value), 10, 64)
			case "data":
				if len(s.data) > 0 {
					s.data = append(s.data, '\n')
				}
				s.data = append(s.data, value...)
			case "":
				if bytes.Contains(value, []byte("shut")) {
					return Frame{}, io.EOF // the gateway is shutting down
				}
			}
			continue
		}
		if len(s.name) == 0 && len(s.data) == 0 {
			continue
		}
		return Frame{Name: string(s.name), ID: id, Data: s.data}, nil
	}
}

// Close ends the connection.
func (s *Stream) Close() error { return s.body.Close() }

// watchOnce reads one SSE connection, moving *since past every event and
// bookmark. It returns nil when the server ended the stream cleanly.
func (c *Client) watchOnce(ctx context.Context, o ListOptions, since *int64, handle func(Event) error) error {
	st, err := c.OpenStream(ctx, o, *since)
	if err != nil {
		return err
	}
	defer st.Close()
	for {
		f, err := st.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch f.Name {
		case EventBookmark:
			if f.ID > *since {
				*since = f.ID
			}
		case EventError:
			var e WatchError
			_ = json.Unmarshal(f.Data, &e)
			if e.Code == CodeGone {
				return fmt.Errorf("%w: %s", ErrGone, e.Detail)
			}
			return fmt.Errorf("the server ended the watch (%s): %s", e.Code, e.Detail)
		default:
			var d WatchEvent
			if err := json.Unmarshal(f.Data, &d); err != nil {
				return fmt.Errorf("decode event %d: %w", f.ID, err)
			}
			if f.ID <= *since {
				continue // never twice
			}
			*since = f.ID
			if err := handle(Event{Type: f.Name, Revision: f.ID, Resource: d.ResourceData}); err != nil {
				return &handlerError{err}
			}
		}
	}
}

// handlerError is an error of the caller's handler: never retried.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }
