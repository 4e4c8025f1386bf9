package pgbus

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/m0serve/m0/internal/testutil"
	"github.com/m0serve/m0/realtime"
)

// pgBin finds PostgreSQL's server programs: Debian keeps them under
// /usr/lib/postgresql/VERSION/bin, off PATH.
func pgBin(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(found) == 0 {
		t.Fatalf("no %s: install PostgreSQL (scripts/test installs Debian's postgresql)", name)
	}
	return found[len(found)-1]
}

// startPG starts a PostgreSQL of the test's own, on a socket in a
// directory of its own, and returns its DSN. As root it runs as the
// postgres user, which PostgreSQL requires.
func startPG(t *testing.T) string {
	dsn, _ := startPGStop(t)
	return dsn
}

// startPGStop is startPG, with the function that stops the database.
func startPGStop(t *testing.T) (string, func()) {
	t.Helper()
	dir, err := os.MkdirTemp("", "m0pg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	run := func(args ...string) *exec.Cmd { return exec.Command(args[0], args[1:]...) }
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal("running as root, and there is no postgres user to run PostgreSQL as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		os.Chown(dir, uid, gid)
		run = func(args ...string) *exec.Cmd {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...)
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := run(pgBin(t, "initdb"), "-D", data, "-A", "trust", "-U", "m0", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	ln, _ := net.Listen("tcp4", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", port, dir)
	if out, err := run(pgBin(t, "pg_ctl"), "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	stop := func() { run(pgBin(t, "pg_ctl"), "-D", data, "-m", "immediate", "stop").Run() }
	t.Cleanup(stop)
	return fmt.Sprintf("postgres://m0@127.0.0.1:%d/postgres?sslmode=disable", port), stop
}

func open(t *testing.T, dsn string) (*Bus, *realtime.Hub) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	hub := realtime.New(&realtime.Options{ReplayFrames: 64, IDs: b, Bus: b})
	b.Start(hub)
	t.Cleanup(b.Close)
	return b, hub
}

func next(t *testing.T, s *realtime.Subscription) *realtime.Frame {
	t.Helper()
	select {
	case f := <-s.C():
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no frame arrived")
		return nil
	}
}

func sql(t *testing.T, dsn, q string, args ...any) {
	t.Helper()
	if err := sqlErr(dsn, q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// sqlErr runs q on a connection of its own, and says how it failed.
func sqlErr(dsn, q string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, q, args...)
	return err
}

// TestTwoInstances: frames published on either instance reach the other's
// subscribers with the same ids, one id space without repeats; a frame of
// 64 KiB (past NOTIFY's payload) arrives whole; a frame published by SQL
// (a trigger's m0.publish) reaches both; the epoch is the database's.
func TestTwoInstances(t *testing.T) {
	dsn := startPG(t)
	a, hubA := open(t, dsn)
	b, hubB := open(t, dsn)
	if a.Epoch() != b.Epoch() || a.Epoch() == 0 {
		t.Fatalf("epochs %d and %d", a.Epoch(), b.Epoch())
	}
	subA, _ := hubA.Subscribe("news", false, "")
	subB, _ := hubB.Subscribe("news", false, "")
	seen := map[realtime.ID]bool{}
	for i := range 20 {
		hub := hubA
		if i%2 == 1 {
			hub = hubB
		}
		id, ok := hub.Publish("news", []byte(strconv.Itoa(i)))
		if !ok || seen[id] {
			t.Fatalf("publish %d: %v %v", i, id, ok)
		}
		seen[id] = true
		fa, fb := next(t, subA), next(t, subB)
		if fa.ID != id || fb.ID != id || string(fa.Data) != strconv.Itoa(i) || string(fb.Data) != strconv.Itoa(i) {
			t.Fatalf("frame %d: A got %v %q, B got %v %q, want %v", i, fa.ID, fa.Data, fb.ID, fb.Data, id)
		}
	}
	big := bytes.Repeat([]byte("x"), realtime.MaxFrame)
	id, _ := hubA.Publish("news", big)
	if f := next(t, subB); f.ID != id || !bytes.Equal(f.Data, big) {
		t.Fatalf("the 64 KiB frame: %v, %d bytes", f.ID, len(f.Data))
	}
	next(t, subA)
	sql(t, dsn, `SELECT m0.publish('news', 'from sql')`)
	fa, fb := next(t, subA), next(t, subB)
	if string(fa.Data) != "from sql" || fa.ID != fb.ID || fa.ID.Seq <= id.Seq {
		t.Fatalf("the frame SQL published: A %v %q, B %v %q", fa.ID, fa.Data, fb.ID, fb.Data)
	}
	// An event type travels with the frame, from an instance and from SQL
	// (m0pub.notify_sql's statement), and SQL refuses one the hub would.
	id, ok := hubA.PublishEvent("news", "update", []byte("typed"))
	if fb := next(t, subB); !ok || fb.ID != id || fb.Event != "update" || string(fb.Data) != "typed" {
		t.Fatalf("the typed frame: %v %q %q", fb.ID, fb.Event, fb.Data)
	}
	next(t, subA)
	sql(t, dsn, `SELECT m0.publish('news', 'typed from sql', 'greeting')`)
	if fa, fb := next(t, subA), next(t, subB); fa.Event != "greeting" || fb.Event != "greeting" || string(fb.Data) != "typed from sql" {
		t.Fatalf("the typed frame SQL published: A %q, B %q %q", fa.Event, fb.Event, fb.Data)
	}
	if err := sqlErr(dsn, `SELECT m0.publish('news', 'x', 'm0-gap')`); err == nil || !strings.Contains(err.Error(), "is refused") {
		t.Fatalf("SQL took the server's own event: %v", err)
	}
}

// TestUpgrade: a database whose schema an older m0serve made (frames
// without an event type) is taken over: the event column and the
// three-argument m0.publish are added, the older frames are kept, and the
// statements an older instance runs still work.
func TestUpgrade(t *testing.T) {
	dsn := startPG(t)
	old, err := os.ReadFile("testdata/schema-before-events.sql")
	if err != nil {
		t.Fatal(err)
	}
	sql(t, dsn, string(old))
	sql(t, dsn, `SELECT m0.publish('news', 'from before')`)
	_, hub := open(t, dsn)
	sub, _ := hub.Subscribe("news", false, "")
	sql(t, dsn, `SELECT m0.put(nextval('m0.frame_seq'), 'news', 'as an older instance writes', 'elsewhere')`)
	if f := next(t, sub); string(f.Data) != "as an older instance writes" || f.Event != "" {
		t.Fatalf("the older instance's frame: %q %q", f.Event, f.Data)
	}
	sql(t, dsn, `SELECT m0.publish('news', 'typed', 'update')`)
	if f := next(t, sub); string(f.Data) != "typed" || f.Event != "update" {
		t.Fatalf("the typed frame: %q %q", f.Event, f.Data)
	}
	var n int
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.QueryRow(ctx, `SELECT count(*) FROM m0.frames WHERE data = 'from before' AND event = ''`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the older frame: %d, %v", n, err)
	}
}

// TestListenerKilled: an instance whose listening connection the database
// ends (pg_terminate_backend) connects again and is delivered every frame
// published meanwhile, in order.
func TestListenerKilled(t *testing.T) {
	dsn := startPG(t)
	_, hubA := open(t, dsn)
	_, hubB := open(t, dsn)
	subB, _ := hubB.Subscribe("c", false, "")
	hubA.Publish("c", []byte("before"))
	next(t, subB)
	sql(t, dsn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, ListenerName)
	var ids []realtime.ID
	for i := range 10 {
		id, _ := hubA.Publish("c", []byte(strconv.Itoa(i)))
		ids = append(ids, id)
	}
	for i, id := range ids {
		if f := next(t, subB); f.ID != id {
			t.Fatalf("after the kill, frame %d is %v, want %v", i, f.ID, id)
		}
	}
}

// TestBadDSN: a database that cannot be reached is an error at Open, and
// Redact hides the password in what is said of it.
func TestBadDSN(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := Open(ctx, "postgres://m0:secret@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"); err == nil {
		t.Fatal("a database at port 1 was opened")
	}
	for _, dsn := range []string{"postgres://m0:secret@db/app", "host=db user=m0 password=secret dbname=app"} {
		if r := Redact(dsn); strings.Contains(r, "secret") || !strings.Contains(r, "m0") {
			t.Fatalf("redacted %q", r)
		}
	}
}

// TestAwayTooLong: a listener away longer than the table keeps frames lets
// its subscribers go, and a resume from before is sent a gap; one away a
// moment is caught up with nothing lost (TestListenerKilled).
func TestAwayTooLong(t *testing.T) {
	dsn := startPG(t)
	_, hubA := open(t, dsn)
	b, hubB := open(t, dsn)
	b.retain = 50 * time.Millisecond // the reconnect takes 100 ms at least
	subB, _ := hubB.Subscribe("c", false, "")
	first, _ := hubA.Publish("c", []byte("before"))
	next(t, subB)
	sql(t, dsn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, ListenerName)
	hubA.Publish("c", []byte("while B was away"))
	select {
	case <-subB.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the subscriber was not let go")
	}
	if s, _ := hubB.Subscribe("c", true, first.String()); s.Gap == nil {
		t.Fatal("a resume from before the absence was not sent a gap")
	}
}

// TestDatabaseDown: while the database cannot be reached, frames published
// here still reach this instance's subscribers, numbered in an epoch of
// their own, and the log says so once.
func TestDatabaseDown(t *testing.T) {
	dsn, stop := startPGStop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	var logged testutil.LockedBuffer
	b.log = slog.New(slog.NewTextHandler(&logged, nil)) // before Start: nothing reads it yet
	hub := realtime.New(&realtime.Options{ReplayFrames: 64, IDs: b, Bus: b})
	b.Start(hub)
	defer b.Close()
	sub, _ := hub.Subscribe("c", false, "")
	stop()
	for i := range 3 {
		id, ok := hub.Publish("c", []byte(strconv.Itoa(i)))
		if !ok || id.Epoch == b.Epoch() {
			t.Fatalf("publish %d while the database is down: %v %v", i, id, ok)
		}
		if f := next(t, sub); f.ID != id {
			t.Fatalf("delivered %v, want %v", f.ID, id)
		}
	}
	if n := strings.Count(logged.String(), "PostgreSQL cannot be reached"); n != 1 {
		t.Fatalf("said %d times:\n%s", n, logged.String())
	}
}
