package realtime

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

type grantVector struct {
	Key, Prefix, Channel, Session, Message, Query string
	Exp                                           int64
	Bound                                         bool
}

func grantVectors(t testing.TB) []grantVector {
	b, err := os.ReadFile("testdata/grants.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Vectors []grantVector }
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f.Vectors
}

// TestGrantVectors: Go signs as the committed vectors say (the Python
// package is held to the same file), and verifies what it signed.
func TestGrantVectors(t *testing.T) {
	for _, v := range grantVectors(t) {
		if got := string(grantMessage(v.Prefix, v.Channel, v.Exp, v.Bound, v.Session)); got != v.Message {
			t.Errorf("message %q, want %q", got, v.Message)
		}
		k := &GrantKeys{Key: []byte(v.Key)}
		if got := k.Sign(v.Prefix, v.Channel, time.Unix(v.Exp, 0), v.Bound, v.Session); got != v.Query {
			t.Errorf("Sign(%q, %q) = %q, want %q", v.Prefix, v.Channel, got, v.Query)
		}
		r := grantRequest(v.Prefix+"?"+v.Query, v.Session)
		ch, err := k.Verify(r, v.Prefix, time.Unix(v.Exp-1, 0))
		if err != nil || ch != v.Channel {
			t.Errorf("Verify(%s) = %q, %v", v.Query, ch, err)
		}
	}
}

func grantRequest(target, session string) *http.Request {
	r := httptest.NewRequest("GET", target, nil)
	if session != "" {
		r.Header.Add("Cookie", DefaultGrantCookie+"="+session)
	}
	return r
}

// TestGrantRefusals: every field tampered with, expiry, another session,
// another mount, rotation.
func TestGrantRefusals(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	prev := []byte(strings.Repeat("p", 32))
	now := time.Unix(1_800_000_000, 0)
	k := &GrantKeys{Key: key, Prev: prev}
	bound := k.Sign("/live", "room", now.Add(time.Minute), true, "alice")
	open := k.Sign("/live", "room", now.Add(time.Minute), false, "")
	edit := func(q, name, value string) string {
		v, _ := url.ParseQuery(q)
		v.Set(name, value)
		return v.Encode()
	}
	del := func(q, name string) string {
		v, _ := url.ParseQuery(q)
		v.Del(name)
		return v.Encode()
	}
	otherSig := (&GrantKeys{Key: []byte(strings.Repeat("x", 32))}).Sign("/live", "room", now.Add(time.Minute), true, "alice")
	rotatedOut := (&GrantKeys{Key: []byte(strings.Repeat("o", 32))}).Sign("/live", "room", now.Add(time.Minute), false, "")
	byPrev := (&GrantKeys{Key: prev}).Sign("/live", "room", now.Add(time.Minute), false, "")
	cases := []struct {
		name, query, session, prefix string
		at                           time.Time
		want                         error
	}{
		{"bound, its session", bound, "alice", "/live", now, nil},
		{"open, any session", open, "mallory", "/live", now, nil},
		{"open, no session", open, "", "/live", now, nil},
		{"signed by the previous key", byPrev, "", "/live", now, nil},
		{"another session", bound, "mallory", "/live", now, ErrGrantSignature},
		{"no session cookie", bound, "", "/live", now, ErrGrantNoSession},
		{"bound to no session", k.Sign("/live", "room", now.Add(time.Minute), true, ""), "", "/live", now, ErrGrantNoSession},
		{"another channel", edit(bound, "ch", "admin"), "alice", "/live", now, ErrGrantSignature},
		{"another mount", bound, "alice", "/other", now, ErrGrantSignature},
		{"a later expiry", edit(bound, "exp", "1900000000"), "alice", "/live", now, ErrGrantSignature},
		{"unbound by hand", edit(bound, "ses", "0"), "alice", "/live", now, ErrGrantSignature},
		{"bound by hand", edit(open, "ses", "1"), "alice", "/live", now, ErrGrantSignature},
		{"forged", otherSig, "alice", "/live", now, ErrGrantSignature},
		{"rotated out", rotatedOut, "", "/live", now, ErrGrantSignature},
		{"expired", bound, "alice", "/live", now.Add(time.Minute), ErrGrantExpired},
		{"no grant", "", "", "/live", now, ErrGrantMissing},
		{"no signature", del(bound, "sig"), "alice", "/live", now, ErrGrantMalformed},
		{"no expiry", del(bound, "exp"), "alice", "/live", now, ErrGrantMalformed},
		{"no ses", del(bound, "ses"), "alice", "/live", now, ErrGrantMalformed},
		{"ses not 0 or 1", edit(bound, "ses", "2"), "alice", "/live", now, ErrGrantMalformed},
		{"expiry not a number", edit(bound, "exp", "soon"), "alice", "/live", now, ErrGrantMalformed},
		{"expiry with a leading zero", edit(bound, "exp", "01800000060"), "alice", "/live", now, ErrGrantMalformed},
		{"signature not base64url", edit(bound, "sig", "!!!"), "alice", "/live", now, ErrGrantMalformed},
		{"signature short", edit(bound, "sig", "AAAA"), "alice", "/live", now, ErrGrantMalformed},
		{"signature with a line end", edit(bound, "sig", func() string {
			v, _ := url.ParseQuery(bound)
			sig := v.Get("sig")
			return sig[:10] + "\n" + sig[10:]
		}()), "alice", "/live", now, ErrGrantMalformed},
		{"a reserved channel", edit(bound, "ch", "\x01x"), "alice", "/live", now, ErrGrantMalformed},
		{"channel twice", bound + "&ch=room", "alice", "/live", now, ErrGrantMalformed},
	}
	for _, c := range cases {
		r := grantRequest(c.prefix+"?"+c.query, c.session)
		ch, err := k.Verify(r, c.prefix, c.at)
		if !errors.Is(err, c.want) || (err == nil) != (ch == "room") {
			t.Errorf("%s: Verify = %q, %v; want %v", c.name, ch, err, c.want)
		}
	}
	// Without the previous key, its grants are refused.
	if _, err := (&GrantKeys{Key: key}).Verify(grantRequest("/live?"+byPrev, ""), "/live", now); !errors.Is(err, ErrGrantSignature) {
		t.Errorf("a grant of a key no longer kept: %v", err)
	}
	// The cookie's name is the keys'.
	named := &GrantKeys{Key: key, Cookie: "sid"}
	r := httptest.NewRequest("GET", "/live?"+named.Sign("/live", "room", now.Add(time.Minute), true, "alice"), nil)
	r.AddCookie(&http.Cookie{Name: "sid", Value: "alice"})
	r.AddCookie(&http.Cookie{Name: DefaultGrantCookie, Value: "mallory"})
	if ch, err := named.Verify(r, "/live", now); err != nil || ch != "room" {
		t.Errorf("M0_GRANT_COOKIE=sid: %q, %v", ch, err)
	}
}

// FuzzGrant: whatever the query, Verify refuses it cleanly unless it is a
// grant the key signed, and what it accepts is what was signed.
func FuzzGrant(f *testing.F) {
	k := &GrantKeys{Key: []byte(strings.Repeat("k", 32))}
	now := time.Unix(1_800_000_000, 0)
	f.Add(k.Sign("/live", "room", now.Add(time.Minute), false, ""), "")
	f.Add(k.Sign("/live", "room", now.Add(time.Minute), true, "s"), "s")
	f.Add("ch=room&exp=1&ses=0&sig=", "")
	f.Add("ch=%zz", "x")
	f.Fuzz(func(t *testing.T, query, session string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		ch, err := k.verify(q, "/live", session, now)
		if err != nil {
			if ch != "" {
				t.Fatalf("refused with a channel %q", ch)
			}
			return
		}
		// Accepted: the query is a grant the key signed for this channel.
		exp := q.Get("exp")
		bound := q.Get("ses") == "1"
		if !bound {
			session = ""
		}
		want := k.Sign("/live", ch, unixString(t, exp), bound, session)
		if v, _ := url.ParseQuery(want); v.Get("sig") != q.Get("sig") {
			t.Fatalf("accepted %q, which the key did not sign", query)
		}
	})
}

func unixString(t *testing.T, s string) time.Time {
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("accepted expiry %q", s)
		}
		n = n*10 + int64(c-'0')
	}
	return time.Unix(n, 0)
}
