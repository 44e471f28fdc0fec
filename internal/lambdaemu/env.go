package lambdaemu

import (
	"context"
	"fmt"
	"maps"
	"os"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/samtemplate"
)

// Resources stand in, on loopback, for the template's: a DynamoDB table
// and a KMS signing key, on one endpoint (moto_server serves both).
type Resources struct {
	// Endpoint is the DynamoDB and KMS API.
	Endpoint string
	// Table stands for each AWS::DynamoDB::Table.
	Table string
	// PassKey is the id of a KMS key on Endpoint (CreatePassKey) that
	// stands for each AWS::KMS::Key; "" when no function needs one.
	PassKey string
	// ChallengeSecret is the ARN of a secret on Endpoint
	// (CreateChallengeSecret) that stands for each
	// AWS::SecretsManager::Secret; "" when the template has none.
	ChallengeSecret string
}

// FunctionEnv returns the environment for running function id of tpl
// against r, as `sam local` would set it: the template's variables
// (parameters at their defaults, !Ref to the table and the key as r
// names them), DYNAMODB_ENDPOINT, KMS_ENDPOINT for a function that signs
// passes, and the function's name, timeout and memory size for the
// emulator.
func FunctionEnv(tpl *samtemplate.Template, id string, r Resources) ([]string, error) {
	f, err := tpl.Function(id)
	if err != nil {
		return nil, err
	}
	refs := tpl.TableRefs(r.Table)
	if r.PassKey != "" {
		maps.Copy(refs, tpl.RefsOfType("AWS::KMS::Key", r.PassKey))
	}
	if r.ChallengeSecret != "" {
		maps.Copy(refs, tpl.RefsOfType("AWS::SecretsManager::Secret", r.ChallengeSecret))
	}
	vars, err := tpl.Env(id, refs)
	if err != nil {
		return nil, err
	}
	vars[config.EnvDynamoEndpoint] = r.Endpoint
	if _, ok := vars[config.EnvPassKMSKeyID]; ok {
		vars[config.EnvKMSEndpoint] = r.Endpoint
	}
	if _, ok := vars[config.EnvChallengeSecretARN]; ok {
		vars[config.EnvSecretsEndpoint] = r.Endpoint
	}
	vars["AWS_LAMBDA_FUNCTION_NAME"] = id
	if f.Timeout > 0 {
		vars["AWS_LAMBDA_FUNCTION_TIMEOUT"] = strconv.Itoa(f.Timeout)
	}
	if f.MemorySize > 0 {
		vars["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] = strconv.Itoa(f.MemorySize)
	}
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		vars["AWS_REGION"] = "us-east-1"
	}
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env, nil
}

// NeedsPassKey reports whether a function of tpl signs admission passes
// with a KMS key of the template, which Resources.PassKey must stand for.
func NeedsPassKey(tpl *samtemplate.Template) bool {
	return len(tpl.IDsOfType("AWS::KMS::Key")) > 0
}

// CreatePassKey creates a KMS key as template.yaml declares the pass key
// (KeySpec ECC_NIST_P256, KeyUsage SIGN_VERIFY) on the KMS API at
// endpoint, and returns its id.
func CreatePassKey(ctx context.Context, endpoint string) (string, error) {
	client, err := admissionpass.NewKMSClient(ctx, endpoint)
	if err != nil {
		return "", err
	}
	out, err := client.CreateKey(ctx, &kms.CreateKeyInput{
		KeySpec:     types.KeySpecEccNistP256,
		KeyUsage:    types.KeyUsageTypeSignVerify,
		Description: aws.String("waiting room admission passes (local)"),
	})
	if err != nil {
		return "", fmt.Errorf("create the pass key on the KMS API at %s (moto_server serves KMS; dynalite does not): %w", endpoint, err)
	}
	return aws.ToString(out.KeyMetadata.KeyId), nil
}
