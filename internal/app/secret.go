package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/example/waitingroom/internal/awsconfig"
	"github.com/example/waitingroom/internal/challenge"
	"github.com/example/waitingroom/internal/config"
)

// ErrNoChallengeSecret is QueueFromEnv's error when CHALLENGE_SECRET_ARN is unset.
var ErrNoChallengeSecret = errors.New("config: " + config.EnvChallengeSecretARN + " is required: the queue function signs proof-of-work challenges with that secret (template.yaml: ChallengeSecret)")

// SecretsAPI is the part of Secrets Manager the queue function calls.
type SecretsAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// ChallengeSecret returns the challenges' secret: the Secrets Manager secret
// cfg.ChallengeSecretARN, read now; else cfg.ChallengeSecret; else nil (random).
func ChallengeSecret(ctx context.Context, cfg config.Config) ([]byte, error) {
	switch {
	case cfg.ChallengeSecretARN != "":
		awscfg, err := awsconfig.Load(ctx, cfg.SecretsEndpoint)
		if err != nil {
			return nil, fmt.Errorf("secrets manager client: %w", err)
		}
		return ReadSecret(ctx, secretsmanager.NewFromConfig(awscfg), cfg.ChallengeSecretARN)
	case cfg.ChallengeSecret != "":
		return []byte(cfg.ChallengeSecret), nil
	}
	return nil, nil
}

// ReadSecret reads the string secret arn, of at least challenge.MinSecretLen bytes.
func ReadSecret(ctx context.Context, client SecretsAPI, arn string) ([]byte, error) {
	out, err := client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return nil, fmt.Errorf("challenge secret %s: %w", arn, err)
	}
	s := aws.ToString(out.SecretString)
	if len(s) < challenge.MinSecretLen {
		return nil, fmt.Errorf("challenge secret %s: %d bytes, want a string of at least %d", arn, len(s), challenge.MinSecretLen)
	}
	return []byte(s), nil
}
