package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/example/waitingroom/internal/api"
)

// errKeyNotConfirmed is a revocation the operator did not confirm.
var errKeyNotConfirmed = errors.New("not revoked: the confirmation did not match the key id")

// keys prints the keyring's signing keys, newest first, a row each (-json:
// the API's answer).
func (a *app) keys(ctx context.Context, c *call) error {
	l, err := c.client.Keys(ctx)
	if err != nil {
		return err
	}
	if c.json {
		return a.printJSON(l)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KID\tSTATE\tSIGNS FROM\tCREATED\tREVOKED")
	for _, k := range l.Keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.KeyID, k.State, keyTime(k.SignFrom), keyTime(k.CreatedAt), keyTime(k.RevokedAt))
	}
	if err := tw.Flush(); err != nil {
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
		return a.printJSON(api.KeyRotation{Key: k})
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
			for _, k := range l.Keys {
				if k.KeyID != kid {
					continue
				}
				fmt.Fprintf(a.stderr, "Revoke key %s (%s; signs from %s)?\n", kid, k.State, keyTime(k.SignFrom))
				fmt.Fprintln(a.stderr, "It leaves the JWKS and signs no more within a minute. Sites refuse its passes once their copy")
				fmt.Fprintln(a.stderr, "of the JWKS expires (within about 6 minutes): the people admitted with them must queue again.")
				if k.State == api.KeySigning {
					fmt.Fprintln(a.stderr, "A new key signs in its place from now.")
				}
				fmt.Fprint(a.stderr, "Type the key id to confirm: ")
				line, _ := bufio.NewReader(a.stdin).ReadString('\n')
				if strings.TrimSpace(line) != kid {
					return errKeyNotConfirmed
				}
				break
			}
		}
		r, err := c.client.RevokeKey(ctx, kid)
		if err != nil {
			return err
		}
		if c.json {
			return a.printJSON(r)
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
	return t.UTC().Format(time.RFC3339)
}
