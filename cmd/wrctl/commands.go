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
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/catalog"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/report"
	"github.com/example/waitingroom/internal/tools/client"
)

// deletedRetention is how long a deleted program's id stays taken: "7 days".
var deletedRetention = fmt.Sprintf("%d days", int(catalog.DeletedRetention/(24*time.Hour)))

func (a *app) get(ctx context.Context, c *call) error {
	p, err := c.client.GetProgram(ctx, c.args[0])
	return a.printAnswer(c, p.Raw, "", err)
}

// putCommand creates the program, or changes the settings its flags give.
func (a *app) putCommand(fs *flag.FlagSet) runner {
	settings := registerSettings(fs, a.clock.Now)
	return func(ctx context.Context, c *call) error {
		set, err := settings()
		if err != nil {
			return err
		}
		return a.put(ctx, c, set)
	}
}

func (a *app) put(ctx context.Context, c *call, set api.ProgramSettings) error {
	p, created, err := c.client.PutProgram(ctx, c.args[0], set)
	return a.printAnswer(c, p.Raw, either(created, "created", "updated")+" program "+c.args[0], err)
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
	return a.printAnswer(c, p.Raw, fmt.Sprintf("admitted %d more of program %s", n, c.args[0]), err)
}

// passesCommand issues bypass passes, one a line.
func (a *app) passesCommand(fs *flag.FlagSet) runner {
	n := fs.Int64("n", 1, "how many passes (1 to 1000)")
	valid := fs.Duration("valid", time.Hour, "how long each pass is valid, whole seconds from 1m to 24h")
	return func(ctx context.Context, c *call) error {
		if *valid%time.Second != 0 {
			return a.usageError("passes", fmt.Sprintf("-valid must be whole seconds, not %v", *valid))
		}
		passes, err := c.client.IssueBypass(ctx, c.args[0], *n, *valid)
		return a.show(c, api.BypassPasses{Passes: passes}, err, func() error {
			for _, p := range passes {
				if _, err := fmt.Fprintln(a.stdout, p); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// tokenCommand prints a token, or with -account an account's place, as the admin API answers it.
func (a *app) tokenCommand(fs *flag.FlagSet) runner {
	account := fs.String("account", "", "print the place of the site's account `SUB` (the sub of its enqueue tokens) instead of a TOKEN's")
	return func(ctx context.Context, c *call) error {
		var t client.TokenAnswer
		var err error
		switch {
		case *account == "" && len(c.args) == 2:
			t, err = c.client.Token(ctx, c.args[0], c.args[1])
		case *account != "" && len(c.args) == 1:
			t, err = c.client.AccountToken(ctx, c.args[0], *account)
		case *account == "":
			return a.usageError("token", "want ID TOKEN, or -account SUB ID, got 1 argument(s)")
		default:
			return a.usageError("token", "with -account SUB, want ID only, not a TOKEN too")
		}
		return a.printAnswer(c, t.Raw, "", err)
	}
}

func (a *app) revoke(ctx context.Context, c *call) error {
	err := c.client.RevokeToken(ctx, c.args[0], c.args[1])
	if err == nil && !c.json {
		fmt.Fprintf(a.stdout, "revoked token %s of program %s\n", c.args[1], c.args[0])
	}
	return err
}

// listCommand prints every program, a row each.
func (a *app) listCommand(fs *flag.FlagSet) runner {
	most := fs.Int("n", 0, "print at most `N` programs (0: all)")
	return func(ctx context.Context, c *call) error {
		all, err := collect(*most, catalog.MaxLimit, func(cursor string, limit int) ([]api.Program, string, error) {
			page, err := c.client.ListPrograms(ctx, cursor, limit)
			return page.Programs, page.NextCursor, err
		})
		return a.show(c, api.ProgramList{Programs: all}, err, func() error {
			rows := [][]string{{"PROGRAM", "WAITING", "ADMITTED", "ISSUED", "RATE/S", "STATE"}}
			for _, p := range all {
				rows = append(rows, []string{p.ProgramID, fmt.Sprint(p.Waiting), fmt.Sprint(p.Admitted), fmt.Sprint(p.Issued),
					fmt.Sprint(p.AdmissionRatePerSecond), stateOf(p, a.clock.Now())})
			}
			return writeTable(a.stdout, tabwriter.AlignRight, rows)
		})
	}
}

// stateOf is p's state at now in a word or two.
func stateOf(p api.Program, now time.Time) string {
	return state(either(p.Closed, "closed", ""), either(p.Paused, "paused", ""), either(domain(p).Opened(now), "", "opens "+clock(p.OpensAt.Time)))
}

// state joins the words that are not "", "open" for none.
func state(words ...string) string {
	return cmp.Or(strings.Join(slices.DeleteFunc(words, func(w string) bool { return w == "" }), ", "), "open")
}

// historyCommand prints a program's changes, newest first.
func (a *app) historyCommand(fs *flag.FlagSet) runner {
	most := fs.Int("n", 100, "print the last `N` changes (0: all)")
	return func(ctx context.Context, c *call) error {
		all, err := collect(*most, history.MaxLimit, func(cursor string, limit int) ([]api.Change, string, error) {
			page, err := c.client.History(ctx, c.args[0], cursor, limit)
			return page.Changes, page.NextCursor, err
		})
		return a.show(c, api.ChangeList{Changes: all}, err, func() error {
			rows := [][]string{{"AT", "EFFECTIVE", "ACTOR", "ACTION", "FIELDS"}}
			for _, ch := range all {
				fields, _ := json.Marshal(ch.Fields)
				eff := ch.EffectiveAt.Sub(ch.At.Time).Round(time.Millisecond)
				rows = append(rows, []string{ch.At.UTC().Format("2006-01-02 15:04:05.000"), "+" + eff.String(), ch.Actor, ch.Action, string(fields)})
			}
			return writeTable(a.stdout, 0, rows)
		})
	}
}

// reportCommand prints a program's report, its series as CSV, or writes it as a page.
func (a *app) reportCommand(fs *flag.FlagSet) runner {
	csv := fs.Bool("csv", false, "print the per-minute series as CSV")
	page := fs.String("html", "", "write the report with its charts to `FILE` (an HTML page)")
	return func(ctx context.Context, c *call) error {
		if n := len(slices.DeleteFunc([]bool{c.json, *csv, *page != ""}, func(b bool) bool { return !b })); n > 1 {
			return a.usageError("report", "-json, -csv and -html are one at a time")
		}
		r, err := c.client.Report(ctx, c.args[0])
		switch {
		case err != nil || c.json:
			return a.show(c, r, err, nil)
		case *csv:
			return report.WriteCSV(a.stdout, r)
		case *page != "":
			if err := writeFile(*page, func(w io.Writer) error { return report.WriteHTML(w, r) }); err != nil {
				return err
			}
			_, err := fmt.Fprintf(a.stdout, "wrote %s\n", *page)
			return err
		}
		return report.WriteTable(a.stdout, r)
	}
}

// writeFile writes name by write, replacing it only once written whole.
func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(name), ".wrctl-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := errors.Join(write(f), f.Close()); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}

// collect reads a list page by page until its end or most items (0: all), asking a page for
// no more than it needs, at most maxPage (0: the server's default).
func collect[T any](most, maxPage int, page func(cursor string, limit int) ([]T, string, error)) ([]T, error) {
	all := []T{}
	for cursor := ""; ; {
		items, next, err := page(cursor, max(0, min(most-len(all), maxPage)))
		if err != nil {
			return nil, err
		}
		if all, cursor = append(all, items...), next; cursor == "" || most > 0 && len(all) >= most {
			return all[:min(len(all), cmp.Or(most, len(all)))], nil
		}
	}
}

// deleteCommand deletes a closed program once its id is typed again (or -yes).
func (a *app) deleteCommand(fs *flag.FlagSet) runner {
	yes := fs.Bool("yes", false, "delete without asking")
	return func(ctx context.Context, c *call) error {
		id := c.args[0]
		if !*yes {
			p, err := c.client.GetProgram(ctx, id)
			if err != nil {
				return err
			}
			if domain(p.Program).TakesEntries(a.clock.Now()) {
				return fmt.Errorf("program %s is open: close it first (wrctl close %s)", id, id)
			}
			fmt.Fprintf(a.stderr, "Delete program %s (%d waiting, %d admitted)? Its id stays taken for %s.\nType the id to confirm: ", id, p.Waiting, p.Admitted, deletedRetention)
			if !a.confirmed(id) {
				return errors.New("not deleted: the confirmation did not match the id")
			}
		}
		return a.show(c, map[string]any{"programId": id, "deleted": true}, c.client.DeleteProgram(ctx, id), func() error {
			_, err := fmt.Fprintf(a.stdout, "deleted program %s; its id stays taken for %s (a put of it answers PROGRAM_DELETED)\n", id, deletedRetention)
			return err
		})
	}
}

// confirmed reads the operator's next line and reports whether it is want.
func (a *app) confirmed(want string) bool {
	line, _ := bufio.NewReader(a.stdin).ReadString('\n')
	return strings.TrimSpace(line) == want
}

// keys prints the signing keys, newest first, a row each.
func (a *app) keys(ctx context.Context, c *call) error {
	l, err := c.client.Keys(ctx)
	return a.show(c, l, err, func() error {
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
	})
}

// rotateKey makes a new signing key, which signs from 15 minutes on.
func (a *app) rotateKey(ctx context.Context, c *call) error {
	k, err := c.client.RotateKey(ctx)
	return a.show(c, api.KeyRotation{Key: k}, err, func() error {
		_, err := fmt.Fprintf(a.stdout, "new key %s: in the JWKS within a minute, signs from %s (in %v)\n",
			k.KeyID, keyTime(k.SignFrom), k.SignFrom.Sub(k.CreatedAt.Time).Round(time.Second))
		return err
	})
}

// revokeKeyCommand revokes a signing key once its id is typed again (or -yes).
func (a *app) revokeKeyCommand(fs *flag.FlagSet) runner {
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
					return errors.New("not revoked: the confirmation did not match the key id")
				}
			}
		}
		r, err := c.client.RevokeKey(ctx, kid)
		return a.show(c, r, err, func() error {
			fmt.Fprintf(a.stdout, "revoked key %s\n", r.Revoked)
			if rep := r.Replacement; rep != nil {
				fmt.Fprintf(a.stdout, "key %s signs in its place from %s\n", rep.KeyID, keyTime(rep.SignFrom))
			}
			return nil
		})
	}
}

// keyTime is t in UTC to the second, "-" for none.
func keyTime(t api.Time) string { return either(t.IsZero(), "-", clock(t.Time)) }

// either is yes when b holds, else no.
func either[T any](b bool, yes, no T) T {
	if b {
		return yes
	}
	return no
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// show returns err, the call's, or prints v: as JSON with -json, else by text.
func (a *app) show(c *call, v any, err error, text func() error) error {
	switch {
	case err != nil:
		return err
	case c.json:
		return writeJSON(a.stdout, v)
	}
	return text()
}

// printAnswer is show of raw, a JSON object, as text: title, then its members in order, one a
// line: the name indented by two, the value as text (strings unquoted).
func (a *app) printAnswer(c *call, raw json.RawMessage, title string, err error) error {
	return a.show(c, raw, err, func() error {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return errors.New("the answer is not a JSON object")
		}
		var rows [][]string
		for dec.More() {
			var v any
			k, err := dec.Token()
			if err = cmp.Or(err, dec.Decode(&v)); err != nil {
				return err
			}
			text, ok := v.(string)
			if !ok {
				b, _ := json.Marshal(v) // a json.Number as it came
				text = string(b)
			}
			rows = append(rows, []string{"  " + fmt.Sprint(k), text})
		}
		if title != "" {
			fmt.Fprintln(a.stdout, title)
		}
		return writeTable(a.stdout, 0, rows)
	})
}

// writeTable writes rows to w as columns two spaces apart; flags are tabwriter's (AlignRight: every column).
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

// edgeCommand switches an existing program's mode at the edge gate, and its paths with -paths.
func (a *app) edgeCommand(fs *flag.FlagSet) runner {
	var paths *[]string // set by -paths, "" clearing them
	fs.Func("paths", "the site's `paths` the gate guards for the program, comma-separated prefixes (/tickets/,/cart/); \"\" clears them", func(v string) error {
		p, err := list.parse(v, nil, nil)
		paths = new(p.([]string))
		return err
	})
	return func(ctx context.Context, c *call) error {
		if _, err := c.client.GetProgram(ctx, c.args[0]); err != nil {
			return err // a mistyped id creates nothing
		}
		return a.put(ctx, c, api.ProgramSettings{EdgeMode: &c.args[1], EdgePaths: paths})
	}
}

// edgeKeys prints the edge keys, newest first, a row each.
func (a *app) edgeKeys(ctx context.Context, c *call) error {
	l, err := c.client.EdgeKeys(ctx)
	return a.show(c, l, err, func() error { return a.edgeKeyRows(l) })
}

// rotateEdgeCommand makes a new edge key (-drop: at once, the others dropped).
func (a *app) rotateEdgeCommand(fs *flag.FlagSet) runner {
	drop := fs.Bool("drop", false, "sign with the new key at once and drop every other: every edge session ends")
	return func(ctx context.Context, c *call) error {
		l, err := c.client.RotateEdgeKeys(ctx, *drop)
		return a.show(c, l, err, func() error { return a.edgeKeyRows(l) })
	}
}

func (a *app) edgeKeyRows(l api.EdgeKeys) error {
	rows := [][]string{{"KEY", "STATE", "SIGNS FROM"}}
	for _, k := range l.Keys {
		rows = append(rows, []string{k.KeyID, k.State, keyTime(k.SignsFrom)})
	}
	if err := writeTable(a.stdout, 0, rows); err != nil {
		return err
	}
	if len(l.Keys) == 0 {
		_, err := fmt.Fprintln(a.stdout, "(no edge key yet: \"wrctl edge-keys rotate\" makes one)")
		return err
	}
	return nil
}
