package queueinput

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/platform/metrics"
	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/services/internal/problem"
)

// requestIDHeader is the header a client may name its request with (as
// X-Request-Id on HTTP).
const requestIDHeader = "X-Request-Id"

// authorizationHeader carries the sender's credentials, as on HTTP.
const authorizationHeader = "Authorization"

// Listener serves the queue input of one gateway.
type Listener struct {
	js   jetstream.JetStream
	exec Executor
	cfg  Config
	log  *slog.Logger

	// handled counts settled queue messages and answered requests.
	handled atomic.Int64
	// outcomes counts them by outcome (no8s_queue_input_messages_total).
	outcomes outcomeCounters
}

// outcomeCounters are the children of no8s_queue_input_messages_total.
type outcomeCounters struct {
	answered, recorded, duplicate, retried, deadLettered prometheus.Counter
}

func newOutcomeCounters(reg prometheus.Registerer) outcomeCounters {
	v := metrics.MustVec(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "queue_input",
		Name: "messages_total", Help: "Queue input messages by outcome: answered (a request), recorded, duplicate (a key's outcome replayed), retried, dead_lettered."},
		[]string{"outcome"}))
	return outcomeCounters{answered: v.WithLabelValues("answered"), recorded: v.WithLabelValues("recorded"), duplicate: v.WithLabelValues("duplicate"),
		retried: v.WithLabelValues("retried"), deadLettered: v.WithLabelValues("dead_lettered")}
}

// New returns a listener that runs requests through exec. Zero Config
// fields take their defaults; a nil log discards.
func New(js jetstream.JetStream, exec Executor, cfg Config, log *slog.Logger) *Listener {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Listener{js: js, exec: exec, cfg: cfg.withDefaults(), log: log, outcomes: newOutcomeCounters(cfg.Metrics)}
}

// Handled is the number of requests answered and queue messages settled.
func (l *Listener) Handled() int64 { return l.handled.Load() }

// Run answers requests and consumes the queue until ctx ends. Then it
// stops taking messages and lets the running ones finish within
// DrainGrace; those still running after it are abandoned unacknowledged
// (the broker redelivers them to another gateway).
func (l *Listener) Run(ctx context.Context) error {
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var wg sync.WaitGroup
	reqSlots := make(chan struct{}, l.cfg.Concurrency)
	var subs []*nats.Subscription
	for _, subj := range []string{subjects.InputRequestApply, subjects.InputRequestDelete} {
		sub, err := l.js.Conn().QueueSubscribe(subj, subjects.InputQueueGroup, func(m *nats.Msg) { l.onRequest(workCtx, reqSlots, &wg, m) })
		if err != nil {
			for _, s := range subs {
				_ = s.Unsubscribe()
			}
			return fmt.Errorf("subscribe %s: %w", subj, err)
		}
		subs = append(subs, sub)
	}
	queueDone := make(chan struct{})
	go func() {
		defer close(queueDone)
		l.serveQueue(ctx, workCtx, &wg)
	}()
	l.log.Info("queue input serving", "requests", []string{subjects.InputRequestApply, subjects.InputRequestDelete}, "queue", subjects.InputQueueAll)
	<-ctx.Done()
	for _, s := range subs {
		_ = s.Unsubscribe()
	}
	<-queueDone
	running := make(chan struct{})
	go func() { wg.Wait(); close(running) }()
	select {
	case <-running:
	case <-time.After(l.cfg.DrainGrace):
		l.log.Warn("queue input: grace over, abandoning running messages (they are redelivered)")
		cancelWork()
		<-running
	}
	return nil
}

// onRequest answers one request in its own goroutine, at most Concurrency
// at once (the subscription waits for a slot: back-pressure).
func (l *Listener) onRequest(ctx context.Context, slots chan struct{}, wg *sync.WaitGroup, m *nats.Msg) {
	if m.Reply == "" {
		l.log.Warn("queue input: a request without a reply subject is ignored (use the queue subjects to fire and forget)", "subject", m.Subject)
		return
	}
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() { <-slots }()
		req := Request{Op: opOf(m.Subject), Document: m.Data, DryRun: m.Header.Get(subjects.InputDryRunHeader),
			PropagationPolicy: m.Header.Get(subjects.InputPropagationPolicyHeader), RequestID: m.Header.Get(requestIDHeader), Authorization: m.Header.Get(authorizationHeader),
			TraceContext: tracing.HeadersContext(m.Header)}
		a := l.exec.Execute(ctx, req)
		reply := &nats.Msg{Subject: m.Reply, Header: answerHeader(a), Data: a.Body}
		if err := m.RespondMsg(reply); err != nil {
			l.log.Warn("queue input: reply failed", "subject", m.Subject, "err", err)
		}
		l.handled.Add(1)
		l.outcomes.answered.Inc()
	}()
}

// answerHeader is an answer's headers with its status.
func answerHeader(a Answer) nats.Header {
	h := nats.Header{}
	for k, v := range a.Header {
		h.Set(k, v)
	}
	h.Set(subjects.InputStatusHeader, strconv.Itoa(a.Status))
	return h
}

// serveQueue consumes the queue until ctx ends, setting the streams and
// the consumer up again whenever consuming fails.
func (l *Listener) serveQueue(ctx, workCtx context.Context, wg *sync.WaitGroup) {
	slots := make(chan struct{}, l.cfg.Concurrency)
	for {
		cons, kv, err := Ensure(ctx, l.js, l.cfg)
		if err == nil {
			err = l.consume(ctx, workCtx, cons, kv, slots, wg)
		}
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("queue input: consuming stopped; setting up again", "err", err, "in", l.cfg.RestartDelay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(l.cfg.RestartDelay):
		}
	}
}

// consume hands every message to handle, at most Concurrency at once. A
// message fetched but not started when ctx ends is left unacknowledged.
func (l *Listener) consume(ctx, workCtx context.Context, cons jetstream.Consumer, kv jetstream.KeyValue, slots chan struct{}, wg *sync.WaitGroup) error {
	it, err := cons.Messages(jetstream.PullMaxMessages(l.cfg.Concurrency))
	if err != nil {
		return fmt.Errorf("consume %s: %w", subjects.InputConsumer, err)
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("next message: %w", err)
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			l.handle(workCtx, kv, msg)
			l.handled.Add(1)
		}()
	}
}

// delivery is one delivery of a queue message.
type delivery struct {
	msg       jetstream.Msg
	seq       uint64
	delivered int
	op        Op
	key       string
	// keys counts the key headers: more than one is refused.
	keys int
	req  Request
}

// handle takes one queue message from claim to settlement.
func (l *Listener) handle(ctx context.Context, kv jetstream.KeyValue, msg jetstream.Msg) {
	md, err := msg.Metadata()
	if err != nil {
		l.log.Warn("queue input: message without metadata", "err", err)
		_ = msg.Term()
		return
	}
	h := msg.Headers()
	d := delivery{msg: msg, seq: md.Sequence.Stream, delivered: int(md.NumDelivered), op: opOf(msg.Subject()), key: h.Get(subjects.InputKeyHeader),
		keys: len(h.Values(subjects.InputKeyHeader))}
	d.req = Request{Op: d.op, Document: msg.Data(), DryRun: h.Get(subjects.InputDryRunHeader),
		PropagationPolicy: h.Get(subjects.InputPropagationPolicyHeader), RequestID: h.Get(requestIDHeader), Authorization: h.Get(authorizationHeader),
		TraceContext: tracing.HeadersContext(h)}
	if d.req.RequestID == "" {
		d.req.RequestID = "input-" + strconv.FormatUint(d.seq, 10)
	}
	log := l.log.With("seq", d.seq, "key", d.key, "delivered", d.delivered)

	if d.delivered > l.cfg.MaxDeliver {
		a := l.exec.Refuse(d.req.RequestID, problem.New(problem.Unavailable, problem.CodeUndeliverable,
			"message %d was delivered %d times without being settled (the gateways handling it stopped each time); it is not run again", d.seq, d.delivered-1))
		l.giveUp(ctx, kv, d, a, nil, "undeliverable: delivered more than "+strconv.Itoa(l.cfg.MaxDeliver)+" times without being settled", log)
		return
	}
	if msg := badEnvelope(d); msg != "" {
		a := l.exec.Refuse(d.req.RequestID, problem.New(problem.Invalid, problem.CodeInvalid, "%s", msg).
			WithFields(problem.FieldError{Path: "/headers/" + subjects.InputKeyHeader, Message: msg}))
		l.giveUp(ctx, kv, d, a, nil, "malformed: "+msg, log)
		return
	}
	dig := digest(d.op, d.req.DryRun, d.req.Document)
	waitUntil := time.Now().Add(2*l.cfg.AckWait + 5*time.Second)
	for {
		c, err := claim(ctx, kv, d.key, dig, d.seq)
		if err != nil {
			log.Warn("queue input: idempotency key unreadable; retrying the message", "err", err)
			_ = msg.NakWithDelay(l.cfg.RetryDelay)
			return
		}
		switch c.state {
		case claimed:
			l.run(ctx, kv, d, c, log)
			return
		case claimedDone:
			l.settleWith(ctx, d, c.rec.Outcome.answer(), false, log)
			return
		case duplicate:
			l.settleWith(ctx, d, c.rec.Outcome.answer(), true, log)
			return
		case reused:
			a := l.exec.Refuse(d.req.RequestID, problem.New(problem.Conflict, problem.CodeKeyReused,
				"the idempotency key %q belongs to another message with a different body (stream sequence %d): the first one wins; send a new message with a new key", d.key, c.rec.Sequence))
			l.settleWith(ctx, d, a, false, log)
			return
		case inFlight:
			// A copy of this message is running on some gateway: wait for
			// its outcome (or for its redelivery to finish it).
			if time.Now().After(waitUntil) {
				_ = msg.NakWithDelay(l.cfg.RetryDelay)
				return
			}
			_ = msg.InProgress()
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// badEnvelope says what is wrong with a message's subject or key; "" when
// nothing is.
func badEnvelope(d delivery) string {
	switch {
	case d.op == "":
		return fmt.Sprintf("subject %s takes nothing: publish on %s or %s", d.msg.Subject(), subjects.InputQueueApply, subjects.InputQueueDelete)
	case d.keys > 1:
		return fmt.Sprintf("%s appears %d times: a message has one key", subjects.InputKeyHeader, d.keys)
	case d.key == "":
		return subjects.InputKeyHeader + " is required: a key of your choosing that identifies the message ([A-Za-z0-9_-], at most " + strconv.Itoa(subjects.InputMaxKeyLength) + " characters)"
	case !subjects.ValidInputKey(d.key):
		return fmt.Sprintf("%s %q is not a valid key: [A-Za-z0-9_-], 1 to %d characters", subjects.InputKeyHeader, d.key, subjects.InputMaxKeyLength)
	}
	return ""
}

// run executes a claimed message and settles it.
func (l *Listener) run(ctx context.Context, kv jetstream.KeyValue, d delivery, c claimResult, log *slog.Logger) {
	a := l.execute(ctx, d)
	act := settle(a, d.delivered, l.cfg.MaxDeliver, l.cfg.RetryDelay, l.cfg.MaxRetryDelay)
	log.Debug("queue input: handled", "status", a.Status, "verb", act.verb.String())
	switch act.verb {
	case record:
		rec, err := finish(ctx, kv, d.key, c, a)
		if err != nil {
			log.Warn("queue input: outcome not recorded; the message is redelivered", "err", err)
			_ = d.msg.NakWithDelay(l.cfg.RetryDelay)
			return
		}
		l.settleWith(ctx, d, rec.Outcome.answer(), false, log)
	case retry:
		log.Info("queue input: retrying", "status", a.Status, "detail", a.Detail, "delay", act.delay)
		_ = d.msg.NakWithDelay(act.delay)
		l.outcomes.retried.Inc()
	case deadLetter:
		l.giveUp(ctx, kv, d, a, &c, act.reason, log)
	}
}

// execute runs the request, telling the broker every AckWait/3 that the
// message is still being worked on.
func (l *Listener) execute(ctx context.Context, d delivery) Answer {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(l.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = d.msg.InProgress()
			}
		}
	})
	defer func() { close(done); wg.Wait() }()
	return l.exec.Execute(ctx, d.req)
}

// settleWith publishes a as the message's outcome and acknowledges it.
func (l *Listener) settleWith(ctx context.Context, d delivery, a Answer, dup bool, log *slog.Logger) {
	if err := l.publishOutcome(ctx, d, a, dup); err != nil {
		log.Warn("queue input: outcome not published; the message is redelivered", "err", err)
		_ = d.msg.NakWithDelay(l.cfg.RetryDelay)
		return
	}
	_ = d.msg.Ack()
	if dup {
		l.outcomes.duplicate.Inc()
	} else {
		l.outcomes.recorded.Inc()
	}
}

// giveUp dead-letters a message: the dead letter with the reason, the
// error outcome (when the message has a valid key), the key released (when
// this message held it), then the ack.
func (l *Listener) giveUp(ctx context.Context, kv jetstream.KeyValue, d delivery, a Answer, c *claimResult, reason string, log *slog.Logger) {
	log.Warn("queue input: dead-lettered", "reason", reason)
	if err := l.publishDead(ctx, d, reason); err != nil {
		log.Warn("queue input: dead letter not published; the message is redelivered", "err", err)
		_ = d.msg.NakWithDelay(l.cfg.RetryDelay)
		return
	}
	if subjects.ValidInputKey(d.key) {
		if err := l.publishOutcome(ctx, d, a, false); err != nil {
			log.Warn("queue input: outcome not published; the message is redelivered", "err", err)
			_ = d.msg.NakWithDelay(l.cfg.RetryDelay)
			return
		}
		if err := l.releaseOwn(ctx, kv, d, c); err != nil {
			log.Warn("queue input: key not released", "err", err)
		}
	}
	_ = d.msg.Ack()
	l.outcomes.deadLettered.Inc()
}

// releaseOwn releases the key when this message holds it unfinished.
func (l *Listener) releaseOwn(ctx context.Context, kv jetstream.KeyValue, d delivery, c *claimResult) error {
	if c == nil {
		e, err := kv.Get(ctx, d.key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read key %s: %w", d.key, err)
		}
		found, err := claimOf(e)
		if err != nil {
			return err
		}
		c = &found
	}
	if c.rec.Sequence != d.seq || c.rec.Done {
		return nil
	}
	return release(ctx, kv, d.key, *c)
}

// publishOutcome publishes a on the key's outcome subject. Its message id
// names the key and the message, so a repeat (a redelivery that finishes
// what a stopped gateway began) is dropped by the stream.
func (l *Listener) publishOutcome(ctx context.Context, d delivery, a Answer, dup bool) error {
	m := &nats.Msg{Subject: subjects.InputOutcome(d.key), Header: answerHeader(a), Data: a.Body}
	m.Header.Set(subjects.InputKeyHeader, d.key)
	m.Header.Set(subjects.InputOperationHeader, string(d.op))
	m.Header.Set(subjects.InputSequenceHeader, strconv.FormatUint(d.seq, 10))
	if dup {
		m.Header.Set(subjects.InputDuplicateHeader, "true")
	}
	if _, err := l.js.PublishMsg(ctx, m, jetstream.WithMsgID("outcome-"+d.key+"-"+strconv.FormatUint(d.seq, 10))); err != nil {
		return fmt.Errorf("publish outcome of %d: %w", d.seq, err)
	}
	return nil
}

// publishDead publishes the message to the dead-letter subject: its body
// and headers as sent, with the reason, the delivery count, its subject
// and its stream sequence.
func (l *Listener) publishDead(ctx context.Context, d delivery, reason string) error {
	m := &nats.Msg{Subject: subjects.InputDead, Header: nats.Header{}, Data: d.msg.Data()}
	for k, v := range d.msg.Headers() {
		if !strings.HasPrefix(k, "Nats-") {
			m.Header[k] = v
		}
	}
	m.Header.Set(subjects.InputReasonHeader, headerValue(reason))
	m.Header.Set(subjects.InputDeliveriesHeader, strconv.Itoa(d.delivered))
	m.Header.Set(subjects.InputSubjectHeader, d.msg.Subject())
	m.Header.Set(subjects.InputSequenceHeader, strconv.FormatUint(d.seq, 10))
	if d.op != "" {
		m.Header.Set(subjects.InputOperationHeader, string(d.op))
	}
	if _, err := l.js.PublishMsg(ctx, m, jetstream.WithMsgID("dead-"+strconv.FormatUint(d.seq, 10))); err != nil {
		return fmt.Errorf("publish dead letter of %d: %w", d.seq, err)
	}
	return nil
}

// headerValue makes s fit a header value: one line, at most 1 KiB.
func headerValue(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 1024 {
		s = s[:1024]
	}
	return strings.ToValidUTF8(s, "?")
}
