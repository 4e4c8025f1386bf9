// Package pgbus makes one PostgreSQL database the bus and the id space of
// every m0serve instance that names it (--pg-listen): the machines behind
// a load balancer number their frames from one sequence, and each frame,
// written to a table, reaches every instance by a NOTIFY carrying its
// number. A frame of any size arrives (NOTIFY carries only the number), and
// an instance whose listening connection dropped catches up from the table.
//
// The schema, made on first use and shared by every instance:
//
//	m0.frame_seq            the sequence frames are numbered from
//	m0.meta (epoch)         the id space's epoch, chosen once
//	m0.frames               seq, channel, event, data, origin, at: the frames of the
//	                        last RetainFor
//	m0.publish(channel, data[, event]) → seq
//	                        numbers and writes a frame and notifies: what a
//	                        trigger calls to publish with no Python in the path
package pgbus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/m0serve/m0/realtime"
)

// Channel is the NOTIFY channel frames are announced on.
const Channel = "m0_frames"

// ListenerName is the application_name of an instance's listening
// connection, as pg_stat_activity shows it.
const ListenerName = "m0serve listener"

// RetainFor is how long the frames table keeps a frame: how far back an
// instance whose connection dropped can catch up.
const RetainFor = 10 * time.Minute

// GapWait is how long a listener waits for a frame numbered before one it
// has (a transaction that took its number and has not committed) before it
// gives up on it.
const GapWait = time.Second

// ReorderWait is how long a hub holds a frame that arrived ahead of a lower
// number (realtime.Reorderer): as long as the listener waits for the lower
// one, as frames through the database can arrive that far apart.
func (b *Bus) ReorderWait() time.Duration { return GapWait }

// schema is made on first use; every statement is idempotent, and an
// advisory lock keeps instances that start together from racing.
const schema = `
SELECT pg_advisory_xact_lock(hashtext('m0serve schema'));
CREATE SCHEMA IF NOT EXISTS m0;
CREATE SEQUENCE IF NOT EXISTS m0.frame_seq;
CREATE TABLE IF NOT EXISTS m0.meta (epoch bigint NOT NULL);
INSERT INTO m0.meta (epoch)
	SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint
	WHERE NOT EXISTS (SELECT 1 FROM m0.meta);
CREATE TABLE IF NOT EXISTS m0.frames (
	seq     bigint PRIMARY KEY,
	channel text NOT NULL,
	data    bytea NOT NULL,
	origin  text NOT NULL DEFAULT '',
	at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS frames_at ON m0.frames (at);
ALTER TABLE m0.frames ADD COLUMN IF NOT EXISTS event text NOT NULL DEFAULT '';
DROP FUNCTION IF EXISTS m0.put(bigint, text, bytea, text); -- before the event: called as before, the one below answers
CREATE OR REPLACE FUNCTION m0.put(p_seq bigint, p_channel text, p_data bytea, p_origin text DEFAULT '', p_event text DEFAULT '')
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, m0 AS $$
BEGIN
	IF p_channel = '' OR ascii(p_channel) < 32 OR ascii(p_channel) = 127 OR octet_length(p_channel) > 1024 THEN
		RAISE EXCEPTION 'm0: the channel name % is refused (empty, reserved or over 1024 bytes)', quote_literal(p_channel);
	END IF;
	IF octet_length(p_data) > 65536 THEN
		RAISE EXCEPTION 'm0: a frame of % bytes is over the 65536 a channel takes', octet_length(p_data);
	END IF;
	IF octet_length(p_event) > 255 OR p_event ~ '[[:cntrl:]]' OR p_event LIKE 'm0-%' THEN
		RAISE EXCEPTION 'm0: the event % is refused (a control character, the server''s m0- prefix or over 255 bytes)', quote_literal(p_event);
	END IF;
	INSERT INTO m0.frames (seq, channel, event, data, origin) VALUES (p_seq, p_channel, p_event, p_data, p_origin);
	PERFORM pg_notify('m0_frames', p_seq::text);
	RETURN p_seq;
END $$;
CREATE OR REPLACE FUNCTION m0.publish(p_channel text, p_data bytea)
RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, m0
AS $$ SELECT m0.put(nextval('m0.frame_seq'), p_channel, p_data) $$;
CREATE OR REPLACE FUNCTION m0.publish(p_channel text, p_data text)
RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, m0
AS $$ SELECT m0.put(nextval('m0.frame_seq'), p_channel, convert_to(p_data, 'UTF8')) $$;
CREATE OR REPLACE FUNCTION m0.publish(p_channel text, p_data bytea, p_event text)
RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, m0
AS $$ SELECT m0.put(nextval('m0.frame_seq'), p_channel, p_data, '', p_event) $$;
CREATE OR REPLACE FUNCTION m0.publish(p_channel text, p_data text, p_event text)
RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, m0
AS $$ SELECT m0.put(nextval('m0.frame_seq'), p_channel, convert_to(p_data, 'UTF8'), '', p_event) $$;
GRANT USAGE ON SCHEMA m0 TO PUBLIC;
`

// ready asks whether the schema is made already (its newest object
// exists): an instance whose role may not make it then uses it as it is.
const ready = `SELECT to_regclass('m0.meta') IS NOT NULL AND to_regprocedure('m0.publish(text,text,text)') IS NOT NULL`

// Redact hides the password of a DSN, as a URL (postgres://user:secret@host/db,
// or ?password=secret) or as key=value pairs (password=secret, or
// password='it\'s'), for anything printed. A URL whose user information
// does not parse cleanly (a password written with its '@', '/' or '#'
// unescaped) has everything before its last '@' hidden.
func Redact(dsn string) string {
	if scheme, rest, ok := strings.Cut(dsn, "://"); ok && !strings.ContainsAny(scheme, " \t=") {
		at := strings.LastIndex(rest, "@")
		u, err := url.Parse(dsn)
		switch {
		case err == nil && u.User != nil && !strings.Contains(u.Host+u.Path+u.RawQuery+u.Fragment, "@"):
			dsn = u.Redacted()
		case at >= 0:
			dsn = scheme + "://xxxxx" + rest[at:]
		}
		return passwordQuery.ReplaceAllString(dsn, "${1}xxxxx")
	}
	return passwordKV.ReplaceAllString(dsn, "${1}xxxxx")
}

var (
	passwordKV    = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S+)`)
	passwordQuery = regexp.MustCompile(`(?i)([?&]password=)[^&#]*`)
)

// Bus is one instance's end of the database: a realtime.IDSource (ids
// from the sequence, in the database's epoch) and a realtime.Bus (frames
// written to the table and announced; the others' delivered to the hub).
type Bus struct {
	dsn    string
	pool   *pgxpool.Pool
	epoch  uint64
	origin string // this process's frames, not delivered back to it
	log    *slog.Logger

	newest atomic.Uint64 // the newest sequence number this process knows of
	// local numbers frames while the database cannot be reached, in an
	// epoch of its own: they reach this instance's subscribers only, and a
	// client that resumes across the change is sent m0-gap.
	local     *realtime.Counter
	localOnce sync.Once
	out       chan *realtime.Frame
	hub       atomic.Pointer[realtime.Hub]

	mu           sync.Mutex
	watermark    uint64               // every frame up to it was delivered, or is late
	ahead        map[uint64]time.Time // delivered beyond a gap: when it arrived
	late         map[uint64]time.Time // passed over after GapWait, still looked for until RetainFor
	down         atomic.Bool          // publishing found the database gone; said once
	listenerDown atomic.Bool          // the listener lost its connection; said once
	done         chan struct{}
	// retain is how long the table keeps a frame (RetainFor): a listener
	// away longer than it may have missed frames for good.
	retain time.Duration
	wg     sync.WaitGroup
	once   sync.Once
}

// Open connects to dsn, makes the schema, and reads the epoch. An error is
// the database's or the network's, for a message that names the DSN with
// Redact.
func Open(ctx context.Context, dsn string) (*Bus, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("not a PostgreSQL DSN: %w", err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	b := &Bus{dsn: dsn, pool: pool, log: slog.Default(), out: make(chan *realtime.Frame, 4096),
		ahead: map[uint64]time.Time{}, late: map[uint64]time.Time{}, done: make(chan struct{}), retain: RetainFor}
	var tag [8]byte
	rand.Read(tag[:])
	b.origin = hex.EncodeToString(tag[:])
	if err := b.setup(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return b, nil
}

func (b *Bus) setup(ctx context.Context) error {
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	made := false
	if err := tx.QueryRow(ctx, ready).Scan(&made); err != nil {
		return err
	}
	if !made {
		if _, err := tx.Exec(ctx, schema); err != nil {
			return err
		}
	}
	var epoch int64
	var last int64
	var called bool
	if err := tx.QueryRow(ctx, `SELECT epoch FROM m0.meta`).Scan(&epoch); err != nil {
		return err
	}
	if err := tx.QueryRow(ctx, `SELECT last_value, is_called FROM m0.frame_seq`).Scan(&last, &called); err != nil {
		return err
	}
	if !called {
		last = 0
	}
	b.epoch = uint64(epoch)
	b.newest.Store(uint64(last))
	b.watermark = uint64(last)
	return tx.Commit(ctx)
}

// Epoch is the id space's epoch.
func (b *Bus) Epoch() uint64 { return b.epoch }

// NextTimeout bounds the wait for an id from the database.
const NextTimeout = time.Second

// Next takes the next id from the sequence (realtime.IDSource). While the
// database cannot be reached (a query failed, and the listener has not
// connected again since) it numbers the frame from a counter of this
// process's, in an epoch of its own, at once: the frame reaches this
// instance's subscribers, not the others'. The hub calls Next under its
// lock: a database that stops answering costs one NextTimeout, not one per
// frame.
func (b *Bus) Next() realtime.ID {
	if b.down.Load() {
		return b.localCounter().Next()
	}
	ctx, cancel := context.WithTimeout(context.Background(), NextTimeout)
	defer cancel()
	var seq int64
	err := b.pool.QueryRow(ctx, `SELECT nextval('m0.frame_seq')`).Scan(&seq)
	if err != nil && ctx.Err() == nil {
		// A pooled connection the server ended fails once; the pool
		// makes the next one afresh.
		err = b.pool.QueryRow(ctx, `SELECT nextval('m0.frame_seq')`).Scan(&seq)
	}
	if err != nil {
		b.unreachable(err)
		return b.localCounter().Next()
	}
	b.seen(uint64(seq))
	return realtime.ID{Epoch: b.epoch, Seq: uint64(seq)}
}

func (b *Bus) localCounter() *realtime.Counter {
	b.localOnce.Do(func() { b.local = realtime.NewCounter() })
	return b.local
}

// Newest is the newest id this process knows of (realtime.IDSource): taken
// here or delivered from the others. It asks the database nothing.
// While the database cannot be reached it is the local counter's, so that a
// producer's ids from NextID are taken (Hub.PublishID).
func (b *Bus) Newest() realtime.ID {
	if b.down.Load() {
		return b.localCounter().Newest()
	}
	return realtime.ID{Epoch: b.epoch, Seq: b.newest.Load()}
}

func (b *Bus) seen(seq uint64) {
	for {
		n := b.newest.Load()
		if seq <= n || b.newest.CompareAndSwap(n, seq) {
			return
		}
	}
}

// Send queues a frame this process published, for the writer
// (realtime.Bus); it never waits.
func (b *Bus) Send(f *realtime.Frame) error {
	if f.ID.Epoch != b.epoch {
		return nil // numbered here while the database was down: local only
	}
	select {
	case b.out <- f:
		return nil
	default:
		return errors.New("pgbus: the queue to the database is full")
	}
}

// Start delivers the other instances' frames to hub, and writes this
// one's, until Close.
func (b *Bus) Start(hub *realtime.Hub) {
	b.hub.Store(hub)
	b.wg.Add(3)
	go b.write()
	go b.listen()
	go b.prune()
}

// Close stops the bus.
func (b *Bus) Close() {
	b.once.Do(func() {
		close(b.done)
		b.wg.Wait()
		b.pool.Close()
	})
}

// unreachable is said when publishing finds the database gone: ids are
// numbered here from then on, until a probe every second finds it again.
func (b *Bus) unreachable(err error) {
	if !b.down.CompareAndSwap(false, true) {
		return
	}
	b.log.Error("m0serve: PostgreSQL cannot be reached; frames published here reach this instance's subscribers only until it can",
		"dsn", Redact(b.dsn), "error", err.Error())
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for b.down.Load() {
			select {
			case <-t.C:
			case <-b.done:
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), NextTimeout)
			err := b.pool.QueryRow(ctx, `SELECT 1`).Scan(new(int))
			cancel()
			if err == nil {
				b.reachable()
			}
		}
	}()
}

func (b *Bus) reachable() {
	if b.down.CompareAndSwap(true, false) {
		b.log.Info("m0serve: PostgreSQL is reachable again", "dsn", Redact(b.dsn))
	}
}

// listenerLost is said when the listening connection drops: publishing
// goes on through the database if it can, and the listener catches up
// when it is back.
func (b *Bus) listenerLost(err error) {
	if b.listenerDown.CompareAndSwap(false, true) {
		b.log.Warn("m0serve: the PostgreSQL listener lost its connection; connecting again", "dsn", Redact(b.dsn), "error", err.Error())
	}
}

// writeBatch is the most frames written in one round trip.
const writeBatch = 256

// write writes this process's frames to the table, in order, as many as
// are waiting in one round trip. A batch the database refuses for being
// unreachable is tried again after a pause, while the queue holds; one it
// refuses for its content (a channel name PostgreSQL's text takes not) is
// dropped and said. On Close what is queued is written, for up to
// NextTimeout.
func (b *Bus) write() {
	defer b.wg.Done()
	var batch []*realtime.Frame
	pause := time.Duration(0)
	for {
		if len(batch) == 0 {
			select {
			case f := <-b.out:
				batch = append(batch, f)
			case <-b.done:
				b.flush(nil)
				return
			}
		}
		batch = b.fill(batch)
		err := b.put(context.Background(), batch)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			b.reachable()
			batch, pause = batch[:0], 0
		case errors.As(err, &pgErr):
			b.log.Error("m0serve: PostgreSQL refused frames; dropped", "frames", len(batch), "error", err.Error())
			batch = batch[:0]
		default:
			b.unreachable(err)
			pause = min(max(2*pause, 100*time.Millisecond), 5*time.Second)
			select {
			case <-time.After(pause):
			case <-b.done:
				b.flush(batch)
				return
			}
		}
	}
}

// put writes frames in one round trip.
func (b *Bus) put(ctx context.Context, frames []*realtime.Frame) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var batch pgx.Batch
	for _, f := range frames {
		batch.Queue(`SELECT m0.put($1, $2, $3, $4, $5)`, int64(f.ID.Seq), f.Channel, f.Data, b.origin, f.Event)
	}
	return b.pool.SendBatch(ctx, &batch).Close()
}

// fill adds to batch what is queued, up to writeBatch, without waiting.
func (b *Bus) fill(batch []*realtime.Frame) []*realtime.Frame {
	for len(batch) < writeBatch {
		select {
		case f := <-b.out:
			batch = append(batch, f)
		default:
			return batch
		}
	}
	return batch
}

// flush writes batch and what is queued as the bus closes, for up to
// NextTimeout.
func (b *Bus) flush(batch []*realtime.Frame) {
	ctx, cancel := context.WithTimeout(context.Background(), NextTimeout)
	defer cancel()
	for {
		if batch = b.fill(batch); len(batch) == 0 || b.put(ctx, batch) != nil {
			return
		}
		batch = batch[:0]
	}
}

// listen holds a connection of its own LISTENing, and fetches what was
// announced, or every second what it may have missed; a dropped
// connection is made again after a pause that doubles up to 5 s, and what
// was written meanwhile is fetched from the table.
func (b *Bus) listen() {
	defer b.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-b.done
		cancel()
	}()
	pause := time.Duration(0)
	var away time.Time // when the listening connection was lost
	for ctx.Err() == nil {
		listened, err := b.listenOnce(ctx, away)
		if ctx.Err() != nil {
			return
		}
		if listened || away.IsZero() {
			away, pause = time.Now(), 0 // lost now, after it listened
		}
		b.listenerLost(err)
		pause = min(max(2*pause, 100*time.Millisecond), 5*time.Second)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return
		}
	}
}

func (b *Bus) listenOnce(ctx context.Context, away time.Time) (listened bool, err error) {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET application_name = '"+ListenerName+"'; LISTEN "+Channel); err != nil {
		conn.Conn().Close(ctx) // not back into the pool listening
		return false, err
	}
	defer conn.Conn().Close(context.Background()) // a listening connection is not reused
	if b.listenerDown.CompareAndSwap(true, false) {
		b.log.Info("m0serve: the PostgreSQL listener is connected again", "dsn", Redact(b.dsn))
	}
	if !away.IsZero() && time.Since(away) >= b.retain {
		// Away longer than the table keeps frames: some may be gone for
		// good. The subscribers resume, and are sent m0-gap.
		var last int64
		if err := conn.QueryRow(ctx, `SELECT last_value FROM m0.frame_seq`).Scan(&last); err != nil {
			return true, err
		}
		if hub := b.hub.Load(); hub != nil {
			hub.Lost(realtime.ID{Epoch: b.epoch, Seq: uint64(last)})
		}
		b.log.Warn("m0serve: the PostgreSQL listener was away longer than frames are kept; its subscribers resume with m0-gap",
			"away", time.Since(away).Round(time.Millisecond).String())
	}
	for {
		if err := b.fetch(ctx, conn.Conn()); err != nil {
			return true, err
		}
		wait, cancel := context.WithTimeout(ctx, time.Second)
		_, err := conn.Conn().WaitForNotification(wait)
		cancel()
		if err != nil && ctx.Err() != nil {
			return true, ctx.Err()
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return true, err
		}
	}
}

// fetch delivers the frames after the watermark, and any late one: in
// order, each once. A number missing before one that arrived is waited for
// up to GapWait; then the watermark passes it, and it is looked for still,
// until RetainFor (a transaction that took its number and commits late), to
// be delivered when it comes. The hub is called with no lock of the bus
// held: it calls Next under its own.
func (b *Bus) fetch(ctx context.Context, conn *pgx.Conn) error {
	b.mu.Lock()
	from := b.watermark
	late := make([]int64, 0, len(b.late))
	for seq := range b.late {
		late = append(late, int64(seq))
	}
	b.mu.Unlock()
	rows, err := conn.Query(ctx, `SELECT seq, channel, event, data, origin FROM m0.frames
		WHERE seq > $1 OR seq = ANY($2) ORDER BY seq LIMIT 1000`, int64(from), late)
	if err != nil {
		return err
	}
	var frames []*realtime.Frame
	var mine []bool
	for rows.Next() {
		var seq int64
		var f realtime.Frame
		var origin string
		if err := rows.Scan(&seq, &f.Channel, &f.Event, &f.Data, &origin); err != nil {
			rows.Close()
			return err
		}
		f.ID = realtime.ID{Epoch: b.epoch, Seq: uint64(seq)}
		if !realtime.ValidEvent(f.Event) {
			// A row written around m0.put: its data still goes, as a
			// message, never a line of its event into the stream.
			f.Event = ""
		}
		frames = append(frames, &f)
		mine = append(mine, origin == b.origin)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	now := time.Now()
	var deliver []*realtime.Frame
	b.mu.Lock()
	for i, f := range frames {
		b.seen(f.ID.Seq)
		_, isLate := b.late[f.ID.Seq]
		if _, done := b.ahead[f.ID.Seq]; done || f.ID.Seq <= b.watermark && !isLate {
			continue
		}
		delete(b.late, f.ID.Seq)
		if !mine[i] {
			deliver = append(deliver, f)
		}
		if f.ID.Seq > b.watermark {
			b.ahead[f.ID.Seq] = now
		}
	}
	b.advanceLocked(now)
	b.mu.Unlock()
	if hub := b.hub.Load(); hub != nil {
		for _, f := range deliver {
			hub.Deliver(f)
		}
	}
	return nil
}

// maxLate bounds the numbers looked for late.
const maxLate = 4096

// advanceLocked moves the watermark over what arrived, and over a gap
// older than GapWait, whose numbers are looked for late from then on.
func (b *Bus) advanceLocked(now time.Time) {
	for seq, at := range b.late {
		if now.Sub(at) >= b.retain {
			delete(b.late, seq)
		}
	}
	for {
		next := b.watermark + 1
		if _, ok := b.ahead[next]; ok {
			delete(b.ahead, next)
			b.watermark = next
			continue
		}
		oldest := time.Time{}
		for seq, at := range b.ahead {
			if seq > next && (oldest.IsZero() || at.Before(oldest)) {
				oldest = at
			}
		}
		if oldest.IsZero() || now.Sub(oldest) < GapWait {
			return
		}
		if len(b.late) < maxLate {
			b.late[next] = now
		}
		b.watermark = next
	}
}

// prune deletes the frames older than RetainFor, every minute.
func (b *Bus) prune() {
	defer b.wg.Done()
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			b.pool.Exec(ctx, `DELETE FROM m0.frames WHERE at < clock_timestamp() - make_interval(secs => $1)`, RetainFor.Seconds())
			cancel()
		case <-b.done:
			return
		}
	}
}
