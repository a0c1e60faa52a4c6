package leadcli

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/textsafe"
	"github.com/fleetstate/fleetstate/internal/usage"
)

// budgetOpts are the flags of fleetstate budget.
type budgetOpts struct {
	tokens  int64   // -1: not given
	cost    float64 // -1: not given
	per     string
	warnAt  int
	reserve float64
	remove  bool
	stop    bool
}

// budgetCommand shows the budgets, or sets one as the operator.
func budgetCommand() command {
	return command{
		Command: Command{Name: "budget", Summary: "show the budgets and their spend, or set one (the operator)",
			Usage: "fleetstate budget [MEMBER] [--tokens N | --cost X] [--per day] [--warn-at P] [--reserve N] [--stop] | --remove] [--json] [--dir DIR | --url URL]",
			About: "Without flags, lists the fleet's budget and the members', in tokens (input plus output) or in cost at the fleet file's prices, with what each has spent and whether it is held: a member whose budget is spent gets no new turn, its queued work waits, and a send to it is refused ERR_BUDGET_EXHAUSTED. A budget in cost is held too while a model it counted has no price. " +
				"With --tokens or --cost, the operator (--dir) sets the budget of MEMBER, or the fleet's without MEMBER; --per day renews it at 00:00 UTC; --warn-at is the percent of it whose crossing notifies (80); --reserve is what each turn holds of it until it ends; --stop ends and interrupts a member's open turn when it crosses the limit (reason budget_exhausted). Raising a spent budget lets the held work go on at once. --remove removes it. " +
				"A budget set here survives a restart of the daemon; an edit of the fleet file's budget takes effect at the next fleetstate up.",
			Example: "fleetstate budget alice --tokens 2000000 --per day"},
		args: "at most one MEMBER", min: 0, max: 1,
		flags: func(fs *flag.FlagSet, o *opts) {
			fs.Int64Var(&o.budget.tokens, "tokens", -1, "the budget's limit: input plus output tokens")
			fs.Float64Var(&o.budget.cost, "cost", -1, "the budget's limit in cost, at the fleet file's prices")
			fs.StringVar(&o.budget.per, "per", "", `"day": the budget renews at 00:00 UTC`)
			fs.IntVar(&o.budget.warnAt, "warn-at", 0, "the percent of the limit whose crossing notifies (default 80)")
			fs.Float64Var(&o.budget.reserve, "reserve", 0, "what each turn holds of the budget, in its unit, until it ends")
			fs.BoolVar(&o.budget.stop, "stop", false, "stop and interrupt a member's open turn when it crosses the limit")
			fs.BoolVar(&o.budget.remove, "remove", false, "remove the budget")
		},
		run: func(ctx context.Context, r *runner, args []string) error {
			b := r.opts.budget
			call := map[string]any{}
			if len(args) == 1 {
				call["member"] = args[0]
			}
			if b.tokens >= 0 {
				call["tokens"] = b.tokens
			}
			if b.cost >= 0 {
				call["cost"] = b.cost
			}
			if b.per != "" {
				call["per"] = b.per
			}
			if b.warnAt != 0 {
				call["warn_at"] = b.warnAt
			}
			if b.reserve != 0 {
				call["reserve"] = b.reserve
			}
			if b.remove {
				call["remove"] = true
			}
			if b.stop {
				call["stop"] = true
			}
			if len(args) == 1 && b.tokens < 0 && b.cost < 0 && !b.remove {
				return fmt.Errorf("budget: a MEMBER is named only to set its budget: add --tokens N, --cost X or --remove")
			}
			var out struct {
				Budgets []fleetstate.BudgetState    `json:"budgets"`
				Prices  map[string]fleetstate.Price `json:"prices,omitempty"`
			}
			if err := r.c.Call(ctx, "fleet_budget", call, &out); err != nil {
				return err
			}
			return r.print(out, FormatBudgets(out.Budgets))
		},
	}
}

// FormatBudgets tells the budgets: whose, the limit, the spend and
// whether it holds work.
func FormatBudgets(bs []fleetstate.BudgetState) string {
	return tabulate(bs, "no budgets\n", "BUDGET\tLIMIT\tSPENT\tSTATE", func(b fleetstate.BudgetState) string {
		who := "the fleet"
		if b.Member != "" {
			who = b.Member
		}
		limit, spent := thousands(b.Tokens)+" tokens", thousands(int64(b.Spent))
		if b.Cost > 0 {
			limit, spent = "cost "+usage.FormatCost(b.Cost), usage.FormatCost(b.Spent)
		}
		if b.Per == "day" {
			limit += " a day"
		}
		state := "ok"
		switch {
		case len(b.Unpriced) > 0:
			state = "no price for " + textsafe.Clip(strings.Join(b.Unpriced, ", "), 80) + ": no new turns"
		case b.Held:
			state = "spent: no new turns"
		case b.Spent >= b.Warn():
			state = "past its warning"
		}
		pct := int(b.Spent * 100 / b.Limit())
		return strings.Join([]string{who, limit, fmt.Sprintf("%s (%d%%)", spent, pct), state}, "\t")
	})
}
