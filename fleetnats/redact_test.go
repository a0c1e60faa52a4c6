package fleetnats_test

import (
	"testing"

	"github.com/fleetstate/fleetstate/fleetnats"
)

// TestRedact: passwords and tokens in NATS URLs never reach a log line.
func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                       "nats://127.0.0.1:4222",
		"nats://alice:s3cret@a:4222,tls://tok@b:4222": "nats://***@a:4222,tls://***@b:4222",
		"user:pw@host:4222":                           "***@host:4222",
		"nats://a:4222,nats://bob:p%40ss@c:4222":      "nats://a:4222,nats://***@c:4222",
		"nats://a@b:pw@host:4222":                     "nats://***@host:4222",
	} {
		if got := fleetnats.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q; want %q", in, got, want)
		}
	}
}
