package lambdaemu

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/example/waitingroom/internal/awsconfig"
	"github.com/example/waitingroom/internal/tools/samtemplate"
)

// NeedsChallengeSecret reports whether tpl declares a Secrets Manager
// secret, which Resources.ChallengeSecret must stand for.
func NeedsChallengeSecret(tpl *samtemplate.Template) bool {
	return len(tpl.IDsOfType("AWS::SecretsManager::Secret")) > 0
}

// CreateChallengeSecret creates a secret of 64 random characters, as
// template.yaml generates ChallengeSecret, on the Secrets Manager API at
// endpoint, and returns its ARN.
func CreateChallengeSecret(ctx context.Context, endpoint string) (string, error) {
	cfg, err := awsconfig.Load(ctx, endpoint)
	if err != nil {
		return "", err
	}
	client := secretsmanager.NewFromConfig(cfg, func(o *secretsmanager.Options) { o.BaseEndpoint = aws.String(endpoint) })
	out, err := client.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name:         aws.String("waitingroom-challenge-" + rand.Text()),
		SecretString: aws.String(rand.Text() + rand.Text() + rand.Text()[:12]),
	})
	if err != nil {
		return "", fmt.Errorf("create the challenge secret on the Secrets Manager API at %s (moto_server serves it): %w", endpoint, err)
	}
	return aws.ToString(out.ARN), nil
}
