package localkeys

import (
	"cmp"
	"context"
	"fmt"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/config"
)

// PassOption returns the App option that signs passes as p describes:
// app.PassOption's KMS keyring with p.WrapKMSKeyID; else the key files of
// NewIssuer; else a keyring of this process (KeyStore, Wrapper), whose
// keys end with it. The issuer is p.Issuer else iss; opts go to a keyring.
func PassOption(ctx context.Context, p config.Pass, iss string, opts ...admissionpass.KeyringOption) (app.Option, error) {
	switch {
	case p.WrapKMSKeyID != "":
		return app.PassOption(ctx, p, iss, opts...)
	case p.KeyFile != "":
		i, err := NewIssuer(p, iss)
		if err != nil {
			return nil, err
		}
		return app.WithPasses(i), nil
	}
	wrap, err := NewWrapper()
	if err != nil {
		return nil, err
	}
	// Keys this process alone can open live as long as it: in its memory,
	// whatever the store (a DynamoDB table outlives the process).
	return app.KeyringOf(p, iss, NewKeyStore(), wrap, opts...), nil
}

// NewIssuer returns the issuer of fixed keys p describes: PEM key files,
// else a P-256 key generated now. The issuer is p.Issuer, else iss, else
// (both empty) each request's base URL.
func NewIssuer(p config.Pass, iss string) (*admissionpass.Issuer, error) {
	if p.KeyFile == "" {
		k, err := Generate()
		if err != nil {
			return nil, err
		}
		return FixedIssuer(cmp.Or(p.Issuer, iss), k)
	}
	signing, err := ReadFile(p.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.EnvPassKeyFile, err)
	}
	var others []admissionpass.Key
	if p.PublishedKeyFile != "" {
		k, err := ReadFile(p.PublishedKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", config.EnvPassPublishedKeyFile, err)
		}
		others = append(others, k)
	}
	return FixedIssuer(cmp.Or(p.Issuer, iss), signing, others...)
}
