// Package procgroup runs a command in a process group of its own and
// kills the whole group, so that the processes a command started die with
// it. Where the system has no process groups (Windows), the command runs
// as usual and only it is killed.
package procgroup
