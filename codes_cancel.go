package fleetstate

// To be folded into errors.go's table (constant, sentinel and text).

// CodeCancelled: the caller gave up on a call, which was cancelled or whose
// deadline passed, before it had a result. Blocking methods of the package
// return ctx.Err() itself; a server reports it to a remote caller under
// this code, with the context's error as the detail. What the call had
// started goes on: a send's turn stays on its ticket.
const CodeCancelled Code = "ERR_CANCELLED"

// ErrCancelled matches every [*Error] with [CodeCancelled].
var ErrCancelled = &Error{Code: CodeCancelled}
