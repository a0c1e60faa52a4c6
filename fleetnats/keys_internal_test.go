package fleetnats

import (
	"regexp"
	"strings"
	"testing"

	"github.com/fleetstate/fleetstate"
	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// keyChars is what a key-value key may hold.
var keyChars = regexp.MustCompile(`^[-/_=.a-zA-Z0-9]+$`)

// nameRunes are runes names are drawn from: the separators and the
// characters that mean something to NATS subjects or to base64, plus some
// beyond ASCII.
var nameRunes = []rune("ab.-_=/*>:$ é名\u00a0~+")

// TestKeysRoundTrip checks, for valid names, that keys hold only what a
// key may hold, that a file's key decodes to its session, agent and name,
// and that the keys of its folders are the prefixes of its own.
func TestKeysRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		session := uuid.NewString()
		agent := rapid.StringOfN(rapid.SampledFrom(nameRunes), 1, 20, -1).Draw(t, "agent")
		name := rapid.StringOfN(rapid.SampledFrom(nameRunes), 1, 60, -1).Draw(t, "name")
		if fleetstate.ValidateAgentName(agent) != nil || fleetstate.ValidateFileName(name) != nil {
			t.Skip("not valid names")
		}
		keys := fileKeys(session, agent, name)
		if got, want := len(keys), strings.Count(name, "/")+1; got != want {
			t.Fatalf("fileKeys(%q) gave %d keys; want %d", name, got, want)
		}
		prev := agentKey(session, agent)
		if !strings.HasPrefix(prev, sessionKey(session)+".") {
			t.Fatalf("agent key %q is not below session key %q", prev, sessionKey(session))
		}
		for _, k := range append([]string{prev}, keys...) {
			if !keyChars.MatchString(k) {
				t.Fatalf("key %q holds a character a key may not", k)
			}
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, prev+".") || strings.Count(k, ".") != strings.Count(prev, ".")+1 {
				t.Fatalf("key %q is not one token below %q", k, prev)
			}
			prev = k
		}
		s, a, n, err := decodeFileKey(keys[len(keys)-1])
		if err != nil || s != session || a != agent || n != name {
			t.Fatalf("decodeFileKey(%q) = %q, %q, %q, %v; want %q, %q, %q", keys[len(keys)-1], s, a, n, err, session, agent, name)
		}
	})
}

func TestDecodeFileKeyRefuses(t *testing.T) {
	for _, key := range []string{
		"", "run", "s", "s.YQ", "s..YQ", "s.YQ.", ".YQ.YQ",
		"s.YQ.YR",   // not the canonical encoding of "a"
		"s.YQ.YQ==", // padding
		"s.YQ.Lw",   // a segment "/"
		"s.YQ.*",
		"s.YQ.Y\rQ", // the decoder skips line breaks
		"s.YQ.YQ\n",
	} {
		if s, a, n, err := decodeFileKey(key); err == nil {
			t.Errorf("decodeFileKey(%q) = %q, %q, %q; want an error", key, s, a, n)
		}
	}
}

// FuzzDecodeFileKey checks that the decoder never fails badly, and that
// what it accepts encodes back to the same key: a key and a file map one
// to one.
func FuzzDecodeFileKey(f *testing.F) {
	f.Add(fileKeys(uuid.NewString(), "scout", "a/b.md")[1])
	f.Add("s.YQ.YQ")
	f.Add("s.YQ.YR")
	f.Add("run")
	f.Fuzz(func(t *testing.T, key string) {
		s, a, n, err := decodeFileKey(key)
		if err != nil {
			return
		}
		keys := fileKeys(s, a, n)
		if got := keys[len(keys)-1]; got != key {
			t.Fatalf("decodeFileKey(%q) = %q, %q, %q, which encode to %q", key, s, a, n, got)
		}
	})
}

// TestMemberNameOneToken: a member's name has one token only; a token with
// a line break, which the base64 decoder would skip, names no member.
func TestMemberNameOneToken(t *testing.T) {
	tok := memberToken("worker-1")
	if name, err := memberName(tok); err != nil || name != "worker-1" {
		t.Fatalf("memberName(%q) = %q, %v; want worker-1", tok, name, err)
	}
	for _, bad := range []string{tok[:2] + "\n" + tok[2:], tok + "\r", "", "!!"} {
		if name, err := memberName(bad); err == nil {
			t.Errorf("memberName(%q) = %q; want an error", bad, name)
		}
	}
}
