package realtime

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/m0serve/m0/internal/wire"
	"github.com/valyala/fasthttp"
)

// A grant is a stream URL the application signed: it names a channel, an
// expiry and, optionally, the session it was given to, and is signed with
// a key the server shares, so the server can hold the stream without
// asking the application. Its query carries:
//
//	ch   the channel
//	exp  the expiry, Unix seconds
//	ses  1 when the grant is bound to the session cookie, else 0
//	sig  HMAC-SHA256 of the grant's message, base64url without padding
//
// The message is the fields "m0-grant-1", the mount's prefix, the channel,
// exp, ses and (bound) the session cookie's value or (not) the empty
// string, each written as its length in decimal bytes, a colon, the bytes
// and a comma: "10:m0-grant-1,5:/live,4:room,10:1767225600,1:0,0:,". One
// grant, one message: no field can be read as part of another.
const (
	grantVersion = "m0-grant-1"
	// DefaultGrantCookie is the session cookie a bound grant names.
	DefaultGrantCookie = "sessionid"
	// MinGrantKey is the shortest signing key taken, in bytes.
	MinGrantKey = 32
)

// The ways a grant is refused.
var (
	ErrGrantMissing   = errors.New("realtime: no grant (ch, exp and sig are required)")
	ErrGrantMalformed = errors.New("realtime: a malformed grant")
	ErrGrantExpired   = errors.New("realtime: the grant has expired")
	ErrGrantSignature = errors.New("realtime: the grant's signature does not verify")
	ErrGrantNoSession = errors.New("realtime: the grant is bound to a session, and the request has no session cookie")
)

// GrantKeys sign and verify grants.
type GrantKeys struct {
	// Key signs, and verifies.
	Key []byte
	// Prev, when set, verifies too: the key before a rotation, kept until
	// the grants it signed have expired.
	Prev []byte
	// Cookie names the session cookie a bound grant is tied to; "" is
	// DefaultGrantCookie.
	Cookie string
}

func (k *GrantKeys) cookie() string {
	if k.Cookie == "" {
		return DefaultGrantCookie
	}
	return k.Cookie
}

// grantMessage is what a grant's signature covers.
func grantMessage(prefix, channel string, exp int64, bound bool, session string) []byte {
	var b []byte
	field := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
		b = append(b, ',')
	}
	field(grantVersion)
	field(prefix)
	field(channel)
	field(strconv.FormatInt(exp, 10))
	if bound {
		field("1")
		field(session)
	} else {
		field("0")
		field("")
	}
	return b
}

func grantSig(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

// Sign returns the query of a grant for channel under the mount at prefix,
// valid until expires; bound ties it to the session cookie's value
// session, which must not be empty (Verify refuses a bound grant without
// a session cookie). The stream's URL is prefix + "?" + the query.
func (k *GrantKeys) Sign(prefix, channel string, expires time.Time, bound bool, session string) string {
	exp := expires.Unix()
	sig := grantSig(k.Key, grantMessage(prefix, channel, exp, bound, session))
	ses := "0"
	if bound {
		ses = "1"
	}
	q := url.Values{"ch": {channel}, "exp": {strconv.FormatInt(exp, 10)}, "ses": {ses},
		"sig": {base64.RawURLEncoding.EncodeToString(sig)}}
	return q.Encode()
}

// Verify checks the grant r carries for the mount at prefix at time now,
// and returns its channel. A grant is refused when a field is missing or
// malformed, when it has expired, or when its signature verifies with
// neither key for this prefix, this channel, this expiry and, for a bound
// grant, the session cookie r sends (ErrGrantSignature covers a forged
// grant, one moved to another channel or mount, one used by another
// session, and one signed by a key rotated out).
func (k *GrantKeys) Verify(r *http.Request, prefix string, now time.Time) (channel string, err error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "", ErrGrantMalformed
	}
	return k.verify(q, prefix, sessionCookie(r.Header["Cookie"], k.cookie()), now)
}

// verifyFast is Verify of a request fasthttp parsed. The query is the
// target's, as sent, from its first "?" on, as net/http's RawQuery and the
// bridges' are: fasthttp's own ends at a "#". Behind the strict reading
// no target holds one (strict.Framer drops a fragment before either front
// end parses the head), so both front ends read the same query.
func (k *GrantKeys) verifyFast(r *fasthttp.Request, prefix string, now time.Time) (string, error) {
	_, query, _ := bytes.Cut(r.Header.RequestURI(), []byte("?"))
	q, err := url.ParseQuery(string(query))
	if err != nil {
		return "", ErrGrantMalformed
	}
	raw := r.Header.RawHeaders()
	if len(raw) == 0 {
		// A request made in Go rather than read from a connection: only
		// the cookies fasthttp parsed are left.
		return k.verify(q, prefix, string(r.Header.Cookie(k.cookie())), now)
	}
	var lines []string
	for line := range bytes.Lines(raw) {
		if name, value, ok := bytes.Cut(line, []byte(":")); ok && wire.EqualFold(name, "Cookie") {
			lines = append(lines, string(bytes.TrimSpace(value)))
		}
	}
	return k.verify(q, prefix, sessionCookie(lines, k.cookie()), now)
}

// sessionCookie is the value of the cookie name in a request's Cookie
// lines, "" for none. Both front ends read it so, as Django and Werkzeug
// read cookies: pairs split at ";", name and value trimmed of spaces and
// tabs, a value's surrounding double quotes removed; the first pair of the
// name counts.
func sessionCookie(lines []string, name string) string {
	for _, line := range lines {
		for pair := range strings.SplitSeq(line, ";") {
			k, v, ok := strings.Cut(pair, "=")
			if !ok || strings.Trim(k, " \t") != name {
				continue
			}
			v = strings.Trim(v, " \t")
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v
		}
	}
	return ""
}

func (k *GrantKeys) verify(q url.Values, prefix, session string, now time.Time) (string, error) {
	if !q.Has("ch") && !q.Has("exp") && !q.Has("sig") {
		return "", ErrGrantMissing
	}
	var f [4]string
	for i, name := range [...]string{"ch", "exp", "ses", "sig"} {
		v := q[name]
		if len(v) != 1 {
			return "", ErrGrantMalformed
		}
		f[i] = v[0]
	}
	channel, expS, ses, sigS := f[0], f[1], f[2], f[3]
	if (ses != "0" && ses != "1") || !ValidChannel(channel) {
		return "", ErrGrantMalformed
	}
	exp, err := strconv.ParseInt(expS, 10, 64)
	if err != nil || exp <= 0 || strconv.FormatInt(exp, 10) != expS {
		return "", ErrGrantMalformed
	}
	// One signature, one spelling: the decoder would skip line ends.
	sig, err := base64.RawURLEncoding.DecodeString(sigS)
	if err != nil || len(sig) != sha256.Size || base64.RawURLEncoding.EncodeToString(sig) != sigS {
		return "", ErrGrantMalformed
	}
	bound := ses == "1"
	if !bound {
		session = ""
	} else if session == "" {
		return "", ErrGrantNoSession
	}
	msg := grantMessage(prefix, channel, exp, bound, session)
	ok := len(k.Key) > 0 && hmac.Equal(sig, grantSig(k.Key, msg))
	if !ok && len(k.Prev) > 0 {
		ok = hmac.Equal(sig, grantSig(k.Prev, msg))
	}
	if !ok {
		return "", ErrGrantSignature
	}
	if now.Unix() >= exp {
		return "", ErrGrantExpired
	}
	return channel, nil
}

// MountOptions are the settings of a hold mount.
type MountOptions struct {
	// Keys verify the grants.
	Keys GrantKeys
	// Logger receives one line for each grant refused; nil is the hub's.
	Logger *slog.Logger
	// KeepHijackedConns: as HoldOptions.KeepHijackedConns.
	KeepHijackedConns bool
	// Now is the clock grants expire by; nil is time.Now.
	Now func() time.Time
}

// HoldMount returns the handler of a hold mount at prefix: a GET of prefix
// carrying a grant the keys verify is held as an SSE stream of the
// grant's channel (replay, gap, heartbeat and drain as any hold), without
// asking the application; a grant refused is a 403 and one log line, and
// any other path a 404. A grant is checked when its stream opens: a stream
// already held outlives its grant's expiry, a key rotated out and the end
// of its session. It serves fasthttp too. A key shorter than MinGrantKey
// (or a previous key shorter than it) panics.
func (h *Hub) HoldMount(prefix string, opts *MountOptions) http.Handler {
	m := &holdMount{hub: h, prefix: prefix}
	if opts != nil {
		m.opts = *opts
	}
	if len(m.opts.Keys.Key) < MinGrantKey || (len(m.opts.Keys.Prev) > 0 && len(m.opts.Keys.Prev) < MinGrantKey) {
		panic(fmt.Sprintf("realtime: a grant key of %d bytes or more is needed", MinGrantKey))
	}
	if m.opts.Logger == nil {
		m.opts.Logger = h.log
	}
	if m.opts.Now == nil {
		m.opts.Now = time.Now
	}
	return m
}

type holdMount struct {
	hub    *Hub
	prefix string
	opts   MountOptions
}

func (m *holdMount) refuse(method, path string, err error) {
	m.opts.Logger.Warn("realtime: a grant is refused", "method", method, "path", path, "mount", m.prefix, "error", err.Error())
}

func (m *holdMount) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != m.prefix {
		wire.Error(w, http.StatusNotFound, false)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		wire.Error(w, http.StatusMethodNotAllowed, false)
		return
	}
	channel, err := m.opts.Keys.Verify(r, m.prefix, m.opts.Now())
	if err != nil {
		m.refuse(r.Method, r.URL.Path, err)
		wire.Error(w, http.StatusForbidden, false)
		return
	}
	m.hub.ServeSSE(w, r, channel)
}

func (m *holdMount) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	if !wire.PathIs(ctx, m.prefix) {
		wire.FastError(ctx, http.StatusNotFound, false)
		return
	}
	if !ctx.IsGet() && !ctx.IsHead() {
		ctx.Response.Header.Set("Allow", "GET, HEAD")
		wire.FastError(ctx, http.StatusMethodNotAllowed, false)
		return
	}
	channel, err := m.opts.Keys.verifyFast(&ctx.Request, m.prefix, m.opts.Now())
	if err == nil {
		m.hub.serveFastSSE(ctx, channel, nil, m.opts.KeepHijackedConns)
		return
	}
	m.refuse(string(ctx.Method()), wire.Path(ctx), err)
	wire.FastError(ctx, http.StatusForbidden, false)
}
