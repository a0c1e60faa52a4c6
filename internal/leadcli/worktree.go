package leadcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/fleetstate/fleetstate/daemon"
	"github.com/fleetstate/fleetstate/internal/worktree"
)

// worktreeCommands are changes and merge, over the members' work trees.
func worktreeCommands() []command {
	changes := memberTool(Command{Name: "changes", Summary: "show what a member's work tree holds: branch, commits, files changed",
		Usage:   "fleetstate changes MEMBER [--diff] [--json] [--dir DIR | --url URL]",
		About:   "Shows the work tree of a member that the fleet file gives one (\"worktree\": true): its path, its branch, how many commits it is ahead of and behind your branch, the files it changed with the lines added and deleted, and the paths it has not committed (a merge takes none of those). --diff prints the diff too, at most 256 KiB of it.",
		Example: "fleetstate changes alice --diff"},
		"fleet_changes", func(fs *flag.FlagSet, o *opts) { fs.BoolVar(&o.diff, "diff", false, "print the diff too") },
		func(o *opts, call map[string]any) { call["diff"] = o.diff },
		func(member string, c worktree.Changes) (string, error) { return FormatChanges(member, c), nil })
	merge := memberTool(Command{Name: "merge", Summary: "merge a member's branch into your checkout's branch",
		Usage:   "fleetstate merge MEMBER [--commit C] [--json] [--dir DIR | --url URL]",
		About:   "Merges the branch of a member's work tree into the branch of the lead's checkout. The merge is made beside the checkout, and the fleet file's merge check (\"merge\": {\"check\": ...}) runs on the result first; the checkout's branch moves only if all went well. It is refused, with nothing changed and exit status 1, while the member has a turn open or queued (open_turn), while either checkout has uncommitted changes (member_dirty, lead_dirty), on a conflict (naming the files), when the check fails (with the end of its output), or when your branch moved meanwhile (lead_moved). --commit C merges the member's branch only if it is still at C, the commit fleetstate changes showed (branch_moved otherwise).",
		Example: "fleetstate merge alice"},
		"fleet_merge", func(fs *flag.FlagSet, o *opts) {
			fs.StringVar(&o.commit, "commit", "", "merge only if the member's branch is still at this commit")
		},
		func(o *opts, call map[string]any) {
			if o.commit != "" {
				call["commit"] = o.commit
			}
		},
		func(_ string, m daemon.Merge) (string, error) {
			if !m.Merged {
				return FormatMerge(m), fmt.Errorf("refused (%s): %s", m.Reason, strings.TrimPrefix(m.Message, "worktree: "))
			}
			return FormatMerge(m), nil
		})
	merge.bound = func(*opts) time.Duration { return waitBound + callBound } // a check, an approval
	return []command{changes, merge}
}

// memberTool is a command of one MEMBER that calls tool with the member
// and what args adds from the flags, and prints the result as show says;
// show's error, after the result is printed, is the command's.
func memberTool[T any](c Command, tool string, flags func(*flag.FlagSet, *opts), args func(*opts, map[string]any), show func(string, T) (string, error)) command {
	return command{Command: c, args: "MEMBER", min: 1, max: 1, flags: flags,
		run: func(ctx context.Context, r *runner, pos []string) error {
			call := map[string]any{"member": pos[0]}
			args(r.opts, call)
			var v T
			if err := r.c.Call(ctx, tool, call, &v); err != nil {
				return noWorktrees(err)
			}
			text, refused := show(pos[0], v)
			if err := r.print(v, text); err != nil {
				return err
			}
			return refused
		}}
}

// noWorktrees says what a daemon without the work tree tools lacks; other
// errors it returns as they are.
func noWorktrees(err error) error {
	if strings.Contains(err.Error(), "tool 'fleet_") && strings.Contains(err.Error(), "not found") {
		return errors.New("the daemon serves no work trees: no member of its fleet file has \"worktree\" (a daemon started without a fleet file, or on NATS, has none)")
	}
	return err
}

// FormatChanges is the text of fleetstate changes.
func FormatChanges(member string, c worktree.Changes) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: branch %s, %d ahead of %s and %d behind\nwork tree: %s\n", member, c.Branch, c.Ahead, c.Into, c.Behind, c.Worktree)
	if len(c.Files) == 0 {
		b.WriteString("no files changed\n")
	}
	for _, f := range c.Files {
		if f.Binary {
			fmt.Fprintf(&b, "  %s (binary)\n", f.Path)
			continue
		}
		fmt.Fprintf(&b, "  %s +%d -%d\n", f.Path, f.Added, f.Deleted)
	}
	if len(c.Uncommitted) > 0 {
		fmt.Fprintf(&b, "not committed: %s\n", strings.Join(c.Uncommitted, ", "))
	}
	if c.Diff != "" {
		b.WriteString(c.Diff)
		if c.DiffClipped {
			fmt.Fprintf(&b, "\n(the diff is %d bytes; this is the first %d)\n", c.DiffBytes, len(c.Diff))
		}
	}
	return b.String()
}

// FormatMerge is the text of fleetstate merge.
func FormatMerge(m daemon.Merge) string {
	switch {
	case m.Merged && m.UpToDate:
		return fmt.Sprintf("%s: %s holds %s already; nothing to merge\n", m.Member, m.Into, m.Branch)
	case m.Merged:
		return fmt.Sprintf("merged %s into %s: %.12s\n", m.Branch, m.Into, m.Commit)
	case m.Reason == "conflict":
		return fmt.Sprintf("%s: conflicts in %s\n", m.Member, strings.Join(m.Files, ", "))
	case m.Reason == "check_failed":
		return fmt.Sprintf("%s: the check failed on the merged result; its output ends:\n%s\n", m.Member, m.CheckOutput)
	}
	return ""
}
