// Package fsx holds the operating-system calls the disk backend stands on:
// a one-step open that follows no symbolic link, an atomic replace of a
// file that does not write its data back under the folder's lock, and a
// non-blocking exclusive lock that the kernel releases when the process
// dies. Each has a portable fallback where the call does not exist.
package fsx
