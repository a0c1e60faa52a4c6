package mcphttp

import (
	"io"
	"net/http"

	"github.com/fleetstate/fleetstate/mcpadapter"
)

// serveFast serves r, a POST of the caller id whose body the handler read
// whole (and bounded), with the adapter's fast path if it takes it (see
// [mcpadapter.FastCalls]), and reports whether it did. Otherwise the
// caller passes r, whose Body still reads body, on to mcp-go.
func serveFast(f *mcpadapter.FastCalls, w http.ResponseWriter, r *http.Request, id mcpadapter.Identity, body []byte) bool {
	resp, done, served := f.Serve(r.Context(), r.Header, id, body)
	if !served {
		return false
	}
	defer done()
	if r.Context().Err() != nil {
		return true // the client is gone: mcp-go writes nothing either
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(resp) // one write, as mcp-go's encoder makes: net/http frames it alike
	return true
}

// readAll appends what r holds to b, as io.ReadAll does; size, if
// positive, is what to expect (a Content-Length within the limit: a
// client's claim, never trusted beyond it).
func readAll(b []byte, r io.Reader, size int64) ([]byte, error) {
	if size > 0 && int64(cap(b)-len(b)) < size+1 {
		b = append(make([]byte, 0, int64(len(b))+size+1), b...)
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
	}
}

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
