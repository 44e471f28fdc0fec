package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/queue"
)

// errNotConfirmed is a deletion the operator did not confirm.
var errNotConfirmed = errors.New("not deleted: the confirmation did not match the id")

// deletedRetention is how long a deleted program's id stays taken, on
// every store (the in-memory one too): "7 days".
var deletedRetention = fmt.Sprintf("%d days", int(queue.DeletedRetention/(24*time.Hour)))

// listCommand prints every program, a row each (-json: one object with
// them all).
func (a *app) listCommand(fs *flag.FlagSet) func(context.Context, *call) error {
	most := fs.Int("n", 0, "print at most `N` programs (0: all)")
	return func(ctx context.Context, c *call) error {
		all := []api.Program{}
		for cursor := ""; ; {
			page, err := c.client.ListPrograms(ctx, cursor, 0)
			if err != nil {
				return err
			}
			all = append(all, page.Programs...)
			if cursor = page.NextCursor; cursor == "" || *most > 0 && len(all) >= *most {
				break
			}
		}
		if *most > 0 && len(all) > *most {
			all = all[:*most]
		}
		if c.json {
			return a.printJSON(api.ProgramList{Programs: all})
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "PROGRAM\tWAITING\tADMITTED\tISSUED\tRATE/S\tSTATE\t")
		for _, p := range all {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%g\t%s\t\n", p.ProgramID, p.Waiting, p.Admitted, p.Issued, p.AdmissionRatePerSecond, stateOf(p, a.clock.Now()))
		}
		return tw.Flush()
	}
}

// stateOf is p's state at now in a word or two.
func stateOf(p api.Program, now time.Time) string {
	var s []string
	if p.Closed {
		s = append(s, "closed")
	}
	if p.Paused {
		s = append(s, "paused")
	}
	if !p.OpensAt.IsZero() && p.OpensAt.After(now) {
		s = append(s, "opens "+p.OpensAt.UTC().Format(time.RFC3339))
	}
	if len(s) == 0 {
		return "open"
	}
	return strings.Join(s, ", ")
}

// deleteCommand deletes a closed program, once the operator has typed its
// id again (or gave -yes).
func (a *app) deleteCommand(fs *flag.FlagSet) func(context.Context, *call) error {
	yes := fs.Bool("yes", false, "delete without asking")
	return func(ctx context.Context, c *call) error {
		id := c.args[0]
		if !*yes {
			p, err := c.client.GetProgram(ctx, id)
			if err != nil {
				return err
			}
			if !p.Closed && (p.ClosesAt.IsZero() || p.ClosesAt.After(a.clock.Now())) {
				return fmt.Errorf("program %s is open: close it first (wrctl close %s)", id, id)
			}
			fmt.Fprintf(a.stderr, "Delete program %s (%d waiting, %d admitted)? Its id stays taken for %s.\nType the id to confirm: ", id, p.Waiting, p.Admitted, deletedRetention)
			line, _ := bufio.NewReader(a.stdin).ReadString('\n')
			if strings.TrimSpace(line) != id {
				return errNotConfirmed
			}
		}
		if err := c.client.DeleteProgram(ctx, id); err != nil {
			return err
		}
		if c.json {
			return a.printJSON(map[string]any{"programId": id, "deleted": true})
		}
		fmt.Fprintf(a.stdout, "deleted program %s; its id stays taken for %s (a put of it answers PROGRAM_DELETED)\n", id, deletedRetention)
		return nil
	}
}

// historyCommand prints a program's changes, newest first.
func (a *app) historyCommand(fs *flag.FlagSet) func(context.Context, *call) error {
	most := fs.Int("n", 100, "print the last `N` changes (0: all)")
	return func(ctx context.Context, c *call) error {
		all := []api.Change{}
		for cursor := ""; ; {
			limit := 0
			if *most > 0 {
				limit = min(*most-len(all), 1000)
			}
			page, err := c.client.History(ctx, c.args[0], cursor, limit)
			if err != nil {
				return err
			}
			all = append(all, page.Changes...)
			if cursor = page.NextCursor; cursor == "" || *most > 0 && len(all) >= *most {
				break
			}
		}
		if c.json {
			return a.printJSON(api.ChangeList{Changes: all})
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "AT\tEFFECTIVE\tACTOR\tACTION\tFIELDS")
		for _, ch := range all {
			fields, _ := json.Marshal(ch.Fields)
			eff := ch.EffectiveAt.Sub(ch.At.Time).Round(time.Millisecond)
			fmt.Fprintf(tw, "%s\t+%v\t%s\t%s\t%s\n", ch.At.UTC().Format("2006-01-02 15:04:05.000"), eff, ch.Actor, ch.Action, fields)
		}
		return tw.Flush()
	}
}

// printJSON prints v as one line of JSON.
func (a *app) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "%s\n", b)
	return err
}
