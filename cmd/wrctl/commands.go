package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/catalog"
	"github.com/example/waitingroom/internal/history"
)

// The errors of a deletion or a revocation the operator did not confirm.
var (
	errNotConfirmed    = errors.New("not deleted: the confirmation did not match the id")
	errKeyNotConfirmed = errors.New("not revoked: the confirmation did not match the key id")
)

// deletedRetention is how long a deleted program's id stays taken, on
// every store (the in-memory one too): "7 days".
var deletedRetention = fmt.Sprintf("%d days", int(catalog.DeletedRetention/(24*time.Hour)))

func (a *app) get(ctx context.Context, c *call) error {
	p, err := c.client.GetProgram(ctx, c.args[0])
	if err != nil {
		return err
	}
	return a.printRaw(c, p.Raw, "")
}

func (a *app) put(ctx context.Context, c *call, set api.ProgramSettings) error {
	p, created, err := c.client.PutProgram(ctx, c.args[0], set)
	if err != nil {
		return err
	}
	title := "updated program " + c.args[0]
	if created {
		title = "created program " + c.args[0]
	}
	return a.printRaw(c, p.Raw, title)
}

// validAdmit checks admit's N: a whole number of at least 1.
func validAdmit(args []string) error {
	if n, err := strconv.ParseInt(args[1], 10, 64); err != nil || n < 1 {
		return fmt.Errorf("want N a whole number of at least 1, not %q", args[1])
	}
	return nil
}

func (a *app) admit(ctx context.Context, c *call) error {
	n, _ := strconv.ParseInt(c.args[1], 10, 64) // checked by validAdmit
	p, err := c.client.Admit(ctx, c.args[0], n)
	if err != nil {
		return err
	}
	return a.printRaw(c, p.Raw, fmt.Sprintf("admitted %d more of program %s", n, c.args[0]))
}

func (a *app) passes(ctx context.Context, c *call, n int64, valid time.Duration) error {
	if valid%time.Second != 0 {
		return a.usageError("passes", fmt.Sprintf("-valid must be whole seconds, not %v", valid))
	}
	passes, err := c.client.IssueBypass(ctx, c.args[0], n, valid)
	if err != nil {
		return err
	}
	if c.json {
		return writeJSON(a.stdout, api.BypassPasses{Passes: passes})
	}
	for _, p := range passes {
		fmt.Fprintln(a.stdout, p)
	}
	return nil
}

func (a *app) token(ctx context.Context, c *call) error {
	t, err := c.client.Token(ctx, c.args[0], c.args[1])
	if err != nil {
		return err
	}
	return a.printRaw(c, t.Raw, "")
}

func (a *app) revoke(ctx context.Context, c *call) error {
	if err := c.client.RevokeToken(ctx, c.args[0], c.args[1]); err != nil {
		return err
	}
	if !c.json {
		fmt.Fprintf(a.stdout, "revoked token %s of program %s\n", c.args[1], c.args[0])
	}
	return nil
}

// listCommand prints every program, a row each (-json: one object with
// them all).
func (a *app) listCommand(fs *flag.FlagSet) func(context.Context, *call) error {
	most := fs.Int("n", 0, "print at most `N` programs (0: all)")
	return func(ctx context.Context, c *call) error {
		all, err := collect(*most, catalog.MaxLimit, func(cursor string, limit int) ([]api.Program, string, error) {
			page, err := c.client.ListPrograms(ctx, cursor, limit)
			return page.Programs, page.NextCursor, err
		})
		if err != nil {
			return err
		}
		if c.json {
			return writeJSON(a.stdout, api.ProgramList{Programs: all})
		}
		rows := [][]string{{"PROGRAM", "WAITING", "ADMITTED", "ISSUED", "RATE/S", "STATE"}}
		for _, p := range all {
			rows = append(rows, []string{p.ProgramID, fmt.Sprint(p.Waiting), fmt.Sprint(p.Admitted), fmt.Sprint(p.Issued),
				fmt.Sprint(p.AdmissionRatePerSecond), stateOf(p, a.clock.Now())})
		}
		return writeTable(a.stdout, tabwriter.AlignRight, rows)
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
		s = append(s, "opens "+clock(p.OpensAt.Time))
	}
	return cmp.Or(strings.Join(s, ", "), "open")
}

// historyCommand prints a program's changes, newest first.
func (a *app) historyCommand(fs *flag.FlagSet) func(context.Context, *call) error {
	most := fs.Int("n", 100, "print the last `N` changes (0: all)")
	return func(ctx context.Context, c *call) error {
		all, err := collect(*most, history.MaxLimit, func(cursor string, limit int) ([]api.Change, string, error) {
			page, err := c.client.History(ctx, c.args[0], cursor, limit)
			return page.Changes, page.NextCursor, err
		})
		if err != nil {
			return err
		}
		if c.json {
			return writeJSON(a.stdout, api.ChangeList{Changes: all})
		}
		rows := [][]string{{"AT", "EFFECTIVE", "ACTOR", "ACTION", "FIELDS"}}
		for _, ch := range all {
			fields, _ := json.Marshal(ch.Fields)
			eff := ch.EffectiveAt.Sub(ch.At.Time).Round(time.Millisecond)
			rows = append(rows, []string{ch.At.UTC().Format("2006-01-02 15:04:05.000"), "+" + eff.String(), ch.Actor, ch.Action, string(fields)})
		}
		return writeTable(a.stdout, 0, rows)
	}
}

// collect reads a list page by page from its start until its last page,
// or until it holds most items (0: all), asking a page for no more than
// it needs, at most maxPage (0: the server's default).
func collect[T any](most, maxPage int, page func(cursor string, limit int) ([]T, string, error)) ([]T, error) {
	all := []T{}
	for cursor := ""; ; {
		limit := 0
		if most > 0 {
			limit = min(most-len(all), maxPage)
		}
		items, next, err := page(cursor, limit)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if cursor = next; cursor == "" || most > 0 && len(all) >= most {
			break
		}
	}
	if most > 0 && len(all) > most {
		all = all[:most]
	}
	return all, nil
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
			if !a.confirmed(id) {
				return errNotConfirmed
			}
		}
		if err := c.client.DeleteProgram(ctx, id); err != nil {
			return err
		}
		if c.json {
			return writeJSON(a.stdout, map[string]any{"programId": id, "deleted": true})
		}
		fmt.Fprintf(a.stdout, "deleted program %s; its id stays taken for %s (a put of it answers PROGRAM_DELETED)\n", id, deletedRetention)
		return nil
	}
}

// confirmed reads the operator's next line and reports whether it is want.
func (a *app) confirmed(want string) bool {
	line, _ := bufio.NewReader(a.stdin).ReadString('\n')
	return strings.TrimSpace(line) == want
}

// keys prints the keyring's signing keys, newest first, a row each (-json:
// the API's answer).
func (a *app) keys(ctx context.Context, c *call) error {
	l, err := c.client.Keys(ctx)
	if err != nil {
		return err
	}
	if c.json {
		return writeJSON(a.stdout, l)
	}
	rows := [][]string{{"KID", "STATE", "SIGNS FROM", "CREATED", "REVOKED"}}
	for _, k := range l.Keys {
		rows = append(rows, []string{k.KeyID, string(k.State), keyTime(k.SignFrom), keyTime(k.CreatedAt), keyTime(k.RevokedAt)})
	}
	if err := writeTable(a.stdout, 0, rows); err != nil {
		return err
	}
	if len(l.Keys) == 0 {
		fmt.Fprintln(a.stdout, "(no key yet: the first pass signed or JWKS request makes one)")
	}
	_, err = fmt.Fprintf(a.stdout, "rotation: a new key signs every %v\n", time.Duration(l.RotationSeconds)*time.Second)
	return err
}

// rotateKey makes a new signing key, which signs from 15 minutes on.
func (a *app) rotateKey(ctx context.Context, c *call) error {
	k, err := c.client.RotateKey(ctx)
	if err != nil {
		return err
	}
	if c.json {
		return writeJSON(a.stdout, api.KeyRotation{Key: k})
	}
	_, err = fmt.Fprintf(a.stdout, "new key %s: in the JWKS within a minute, signs from %s (in %v)\n",
		k.KeyID, keyTime(k.SignFrom), k.SignFrom.Sub(k.CreatedAt.Time).Round(time.Second))
	return err
}

// revokeKeyCommand revokes a signing key, once the operator has typed its
// id again (or gave -yes).
func (a *app) revokeKeyCommand(fs *flag.FlagSet) func(context.Context, *call) error {
	yes := fs.Bool("yes", false, "revoke without asking")
	return func(ctx context.Context, c *call) error {
		kid := c.args[0]
		if !*yes {
			l, err := c.client.Keys(ctx)
			if err != nil {
				return err
			}
			// An unknown kid asks nothing: the server refuses it.
			if i := slices.IndexFunc(l.Keys, func(k api.SigningKey) bool { return k.KeyID == kid }); i >= 0 {
				k := l.Keys[i]
				fmt.Fprintf(a.stderr, "Revoke key %s (%s; signs from %s)?\n", kid, k.State, keyTime(k.SignFrom))
				fmt.Fprintln(a.stderr, "It leaves the JWKS and signs no more within a minute. Sites refuse its passes once their copy")
				fmt.Fprintln(a.stderr, "of the JWKS expires (within about 6 minutes): the people admitted with them must queue again.")
				if k.State == api.KeySigning {
					fmt.Fprintln(a.stderr, "A new key signs in its place from now.")
				}
				fmt.Fprint(a.stderr, "Type the key id to confirm: ")
				if !a.confirmed(kid) {
					return errKeyNotConfirmed
				}
			}
		}
		r, err := c.client.RevokeKey(ctx, kid)
		if err != nil {
			return err
		}
		if c.json {
			return writeJSON(a.stdout, r)
		}
		fmt.Fprintf(a.stdout, "revoked key %s\n", r.Revoked)
		if rep := r.Replacement; rep != nil {
			fmt.Fprintf(a.stdout, "key %s signs in its place from %s\n", rep.KeyID, keyTime(rep.SignFrom))
		}
		return nil
	}
}

// keyTime is t in UTC to the second, "-" for none.
func keyTime(t api.Time) string {
	if t.IsZero() {
		return "-"
	}
	return clock(t.Time)
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// printRaw prints raw, an answer's JSON object: as is with -json,
// otherwise its fields, in the server's order, one per line.
func (a *app) printRaw(c *call, raw json.RawMessage, title string) error {
	if c.json {
		return writeJSON(a.stdout, raw)
	}
	fields, err := orderedFields(raw)
	if err != nil {
		return err
	}
	if title != "" {
		fmt.Fprintln(a.stdout, title)
	}
	return writeTable(a.stdout, 0, fields)
}

// writeTable writes rows as columns that text/tabwriter aligns, two spaces
// apart, to w; flags are tabwriter's (AlignRight: every column right
// aligned, the last one too).
func writeTable(w io.Writer, flags uint, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', flags)
	for _, row := range rows {
		line := strings.Join(row, "\t")
		if flags&tabwriter.AlignRight != 0 {
			line += "\t" // a cell ends at a tab: the last one too, to be aligned
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// orderedFields returns the members of a JSON object in order, as rows
// of a table: the name indented by two spaces, the value as text (strings
// unquoted).
func orderedFields(raw []byte) ([][]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("the answer is not a JSON object")
	}
	var out [][]string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		text := fmt.Sprint(v)
		if s, ok := v.(string); ok {
			text = s
		} else if _, ok := v.(json.Number); !ok {
			b, _ := json.Marshal(v)
			text = string(b)
		}
		out = append(out, []string{"  " + fmt.Sprint(k), text})
	}
	return out, nil
}
