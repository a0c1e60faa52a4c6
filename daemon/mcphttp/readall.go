package mcphttp

import "io"

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
