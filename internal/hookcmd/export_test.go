package hookcmd

import "encoding/json"

// KeyOf is the key of the request a PermissionRequest hook reads as in.
func KeyOf(in []byte) string {
	var h hookInput
	_ = json.Unmarshal(in, &h)
	return h.key()
}
