package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/mcpadapter"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/spf13/afero"
)

// appliedFile keeps, in the state directory's private folder, the
// budgets the fleet file named when a daemon last applied it: a budget
// the file still names the same way is left as it is (the operator may
// have raised it since), one the file changed or dropped is set anew.
const appliedFile = "budgets.applied.json"

// fileBudgets are a fleet file's budgets: by member, "" for the fleet's.
type fileBudgets map[string]fleetstate.Budget

// budgetsOf returns the budgets ro names.
func budgetsOf(ro *Roster) fileBudgets {
	out := fileBudgets{}
	if ro.Budget != nil {
		out[""] = *ro.Budget
	}
	for _, a := range ro.Agents {
		if a.Budget != nil {
			out[a.Name] = *a.Budget
		}
	}
	return out
}

// applyBudgets gives st's rendezvous the budgets of the fleet file that
// changed since a daemon last applied it, and removes those it no longer
// names, so that a budget raised by the operator survives a restart
// while an edit of the file takes effect.
func (d *Daemon) applyBudgets(st *state) error {
	if d.cfg.Roster == "" {
		return nil
	}
	ro, err := LoadRoster(d.cfg.Roster, "")
	if err != nil {
		return err
	}
	if ro.Prices != nil || len(st.rv.Prices()) > 0 {
		if err := st.rv.SetPrices(ro.Prices); err != nil {
			return fmt.Errorf("daemon: the fleet file's prices: %w", err)
		}
	}
	now := budgetsOf(ro)
	fsys, path := st.store.Fs(), st.store.PrivatePath(appliedFile)
	before := fileBudgets{}
	data, err := afero.ReadFile(fsys, path)
	switch {
	case err == nil:
		if json.Unmarshal(data, &before) != nil {
			d.log.Warn("fleetstate: the budgets last applied are unreadable: every budget of the fleet file is set")
			before = fileBudgets{}
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("daemon: read the budgets last applied: %w", err)
	}
	for name, b := range now {
		if old, ok := before[name]; !ok || old != b {
			if err := st.rv.SetBudget(name, &b); err != nil {
				return fmt.Errorf("daemon: the fleet file's budget of %q: %w", name, err)
			}
		}
	}
	for name := range before {
		if _, ok := now[name]; !ok {
			if err := st.rv.SetBudget(name, nil); err != nil {
				return fmt.Errorf("daemon: remove the budget of %q: %w", name, err)
			}
		}
	}
	if maps.Equal(before, now) {
		return nil
	}
	data, _ = json.Marshal(now)
	tmp := path + ".tmp"
	if err := afero.WriteFile(fsys, tmp, data, 0o600); err != nil {
		return fmt.Errorf("daemon: write the budgets applied: %w", err)
	}
	return fsys.Rename(tmp, path)
}

// budgetArgs are fleet_budget's arguments.
type budgetArgs struct {
	Member  string   `json:"member"`
	Tokens  *int64   `json:"tokens"`
	Cost    *float64 `json:"cost"`
	Per     string   `json:"per"`
	WarnAt  int      `json:"warn_at"`
	Reserve float64  `json:"reserve"`
	Remove  bool     `json:"remove"`
	Stop    bool     `json:"stop"`
	Reload  bool     `json:"reload"`
}

// budgetTool returns fleet_budget: any lead reads the budgets; the
// operator alone sets them, or has reload apply the fleet file's again.
func budgetTool(rv *fleetstate.Rendezvous, reload func() error) server.ServerTool {
	tool := mcp.NewTool("fleet_budget",
		mcp.WithDescription("Lead only. The fleet's budgets, in tokens (input plus output) or in cost at the fleet file's prices, with what each has spent, and the prices; a member whose budget is spent gets no new turn and a send to it is refused ERR_BUDGET_EXHAUSTED. With tokens or cost (or remove), sets (or removes) the budget of member, or the fleet's without member: the operator alone may, and held work goes on at once if the new budget has room."),
		mcp.WithString("member", mcp.Description("the member whose budget to set; none for the fleet's")),
		mcp.WithNumber("tokens", mcp.Description("the new limit, input plus output tokens")),
		mcp.WithNumber("cost", mcp.Description("the new limit in cost, at the prices of the fleet file (instead of tokens)")),
		mcp.WithString("per", mcp.Description(`"day" for a budget that renews at 00:00 UTC; none for the fleet's life`)),
		mcp.WithNumber("warn_at", mcp.Description("percent of the limit whose crossing warns (default 80)")),
		mcp.WithNumber("reserve", mcp.Description("what each turn holds of the budget, in its unit, from its send until it ends (in tokens, less what it used): sends are admitted only while every reserve fits")),
		mcp.WithBoolean("stop", mcp.Description("stop a member's open turn (failed, budget_exhausted) and interrupt it when its usage crosses the limit")),
		mcp.WithBoolean("remove", mcp.Description("remove the budget")),
		mcp.WithBoolean("reload", mcp.Description("read the daemon's fleet file again and set the budgets it changed (fleetstate up does)")),
		mcp.WithTitleAnnotation("Budgets"), mcp.WithDestructiveHintAnnotation(false), mcp.WithOpenWorldHintAnnotation(false))
	return server.ServerTool{Tool: tool, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		const op = "budget"
		id, _ := mcpadapter.IdentityOf(ctx)
		if id.Role != mcpadapter.RoleLead {
			return mcpadapter.ErrorResult(&fleetstate.Error{Code: fleetstate.CodeNotPermitted, Op: op, Err: errors.New("leads only")}), nil
		}
		var a budgetArgs
		data, _ := json.Marshal(req.GetArguments())
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return mcpadapter.ErrorResult(&fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: op, Err: err}), nil
		}
		limit := a.Tokens != nil || a.Cost != nil
		set := limit || a.Remove || a.Reload
		switch {
		case a.Reload && (limit || a.Remove || a.Member != ""):
			return mcpadapter.ErrorResult(&fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: op, Err: errors.New("reload takes no other argument")}), nil
		case set && id.Agent != mcpadapter.OperatorAgent:
			return mcpadapter.ErrorResult(&fleetstate.Error{Code: fleetstate.CodeNotPermitted, Op: op,
				Err: errors.New("only the operator sets budgets (fleetstate budget with --dir, or the fleet file)")}), nil
		case a.Reload:
			if err := reload(); err != nil {
				return mcpadapter.ErrorResult(&fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: op, Err: err}), nil
			}
		case a.Remove && limit:
			return mcpadapter.ErrorResult(&fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: op, Err: errors.New("a limit and remove together")}), nil
		case !set && (a.Per != "" || a.WarnAt != 0 || a.Reserve != 0 || a.Stop):
			return mcpadapter.ErrorResult(&fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: op, Err: errors.New("per, warn_at, reserve and stop need tokens or cost")}), nil
		case a.Remove:
			if err := rv.SetBudget(a.Member, nil); err != nil {
				return mcpadapter.ErrorResult(err), nil
			}
		case set:
			b := &fleetstate.Budget{Per: a.Per, WarnAt: a.WarnAt, Reserve: a.Reserve, Stop: a.Stop}
			if a.Tokens != nil {
				b.Tokens = *a.Tokens
			}
			if a.Cost != nil {
				b.Cost = *a.Cost
			}
			if err := rv.SetBudget(a.Member, b); err != nil {
				return mcpadapter.ErrorResult(err), nil
			}
		}
		out := struct {
			Budgets []fleetstate.BudgetState    `json:"budgets"`
			Prices  map[string]fleetstate.Price `json:"prices,omitempty"`
		}{Budgets: rv.Budgets(), Prices: rv.Prices()}
		if out.Budgets == nil {
			out.Budgets = []fleetstate.BudgetState{}
		}
		text, _ := json.Marshal(out)
		return mcp.NewToolResultStructured(out, string(text)), nil
	}}
}
