package main

import (
	"context"
	"fmt"
)

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
