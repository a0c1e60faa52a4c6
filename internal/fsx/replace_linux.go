package fsx

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Replace puts the finished file tmp at final, which readers see change
// from the old content to the new in one step, as with a rename.
//
// Where final exists, the two names are exchanged (RENAME_EXCHANGE) and the
// old file, now at tmp, is unlinked. A rename over an existing file would do
// the same for readers, but ext4 writes the new file's data back inside it
// (its auto_da_alloc heuristic, for a program that neither syncs nor waits),
// under the folder's lock: one disk write per put, one put at a time per
// folder. A caller that does not sync was never promised survival of a
// power failure; one that syncs has its data on disk before the exchange. A crash
// between the exchange and the unlink leaves the old content under the
// temporary name, which is ignored and swept like any leftover.
//
// Where final does not exist, or the file system cannot exchange, it is a
// plain rename. A folder at final is put back and reported as EISDIR.
func Replace(tmp, final string) error {
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_EXCHANGE)
	if err != nil {
		// ENOENT: final does not exist (or tmp, which the rename reports);
		// EINVAL, ENOSYS, EOPNOTSUPP: no exchange on this file system.
		return os.Rename(tmp, final)
	}
	err = unix.Unlink(tmp)
	if errors.Is(err, unix.EISDIR) {
		if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_EXCHANGE); err != nil {
			return &os.LinkError{Op: "rename", Old: tmp, New: final, Err: err}
		}
		return &os.LinkError{Op: "rename", Old: tmp, New: final, Err: unix.EISDIR}
	}
	// Any other failure leaves the old content under the temporary name:
	// the put is done, and the leftover is swept later.
	return nil
}
