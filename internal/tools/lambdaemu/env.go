package lambdaemu

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/awsconfig"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/tools/localkms"
	"github.com/example/waitingroom/internal/tools/samtemplate"
)

// Resources stand in, on loopback, for the template's: a DynamoDB table,
// KMS keys and a secret, on one endpoint (moto_server serves them all).
type Resources struct {
	Endpoint string // the DynamoDB, KMS and Secrets Manager API
	Table    string // stands for each AWS::DynamoDB::Table
	// KMSKeys maps the logical id of each AWS::KMS::Key of the template to
	// the id of a key on Endpoint of the same spec and usage; nil when
	// there is none.
	KMSKeys map[string]string
	// KMSEndpoint is the KMS API the functions call: a localkms.Proxy in
	// front of Endpoint; "" for Endpoint itself.
	KMSEndpoint string
	// ChallengeSecret is the ARN of a secret on Endpoint that stands for
	// each AWS::SecretsManager::Secret; "" when the template has none.
	ChallengeSecret string
}

// kmsVariables are the variables that name a KMS key: a function with one
// gets KMS_ENDPOINT.
var kmsVariables = []string{config.EnvPassWrapKMSKeyID, config.EnvShuffleKMSKeyID}

// FunctionEnv returns the environment for running function id of tpl
// against r, as `sam local` would set it: the template's variables with
// r's resources, the endpoints the function needs, and its name, timeout
// and memory size for the emulator.
func FunctionEnv(tpl *samtemplate.Template, id string, r Resources) ([]string, error) {
	f, err := tpl.Function(id)
	if err != nil {
		return nil, err
	}
	refs := tpl.TableRefs(r.Table)
	maps.Copy(refs, r.KMSKeys)
	if r.ChallengeSecret != "" {
		maps.Copy(refs, tpl.RefsOfType("AWS::SecretsManager::Secret", r.ChallengeSecret))
	}
	vars, err := tpl.Env(id, refs)
	if err != nil {
		return nil, err
	}
	vars[config.EnvDynamoEndpoint] = r.Endpoint
	if slices.ContainsFunc(kmsVariables, func(k string) bool { return vars[k] != "" }) {
		vars[config.EnvKMSEndpoint] = cmp.Or(r.KMSEndpoint, r.Endpoint)
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

// Provide stands in for tpl's resources on endpoint, for FunctionEnv:
// table for its tables, a key of the same kind for each AWS::KMS::Key,
// reached through a localkms.Proxy, and a secret for each
// AWS::SecretsManager::Secret. Close the proxy (nil when tpl has no KMS
// key) once the functions are done.
func Provide(ctx context.Context, tpl *samtemplate.Template, endpoint, table string) (Resources, *localkms.Proxy, error) {
	r := Resources{Endpoint: endpoint, Table: table}
	var err error
	if len(tpl.IDsOfType("AWS::SecretsManager::Secret")) > 0 {
		if r.ChallengeSecret, err = createChallengeSecret(ctx, endpoint); err != nil {
			return r, nil, err
		}
	}
	if len(tpl.IDsOfType("AWS::KMS::Key")) == 0 {
		return r, nil, nil
	}
	if r.KMSKeys, err = createKMSKeys(ctx, tpl, endpoint); err != nil {
		return r, nil, err
	}
	proxy, err := localkms.Start(endpoint)
	if err != nil {
		return r, nil, err
	}
	r.KMSEndpoint = proxy.URL()
	return r, proxy, nil
}

// createKMSKeys creates, on the KMS API at endpoint, a key for each
// AWS::KMS::Key of tpl with its KeySpec and KeyUsage (CloudFormation's
// defaults when it names none), and returns their ids by logical id.
func createKMSKeys(ctx context.Context, tpl *samtemplate.Template, endpoint string) (map[string]string, error) {
	client, err := admissionpass.NewKMSClient(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	keys := map[string]string{}
	for _, id := range tpl.IDsOfType("AWS::KMS::Key") {
		props := tpl.Properties(id)
		spec, ok1 := literal(props["KeySpec"], string(types.KeySpecSymmetricDefault))
		usage, ok2 := literal(props["KeyUsage"], string(types.KeyUsageTypeEncryptDecrypt))
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%s: KeySpec %v, KeyUsage %v: want literal strings", id, props["KeySpec"], props["KeyUsage"])
		}
		out, err := client.CreateKey(ctx, &kms.CreateKeyInput{
			KeySpec:     types.KeySpec(spec),
			KeyUsage:    types.KeyUsageType(usage),
			Description: aws.String("waiting room " + id + " (local)"),
		})
		if err != nil {
			return nil, fmt.Errorf("create %s (%s, %s) on the KMS API at %s (moto_server serves KMS; dynalite does not): %w", id, spec, usage, endpoint, err)
		}
		keys[id] = aws.ToString(out.KeyMetadata.KeyId)
	}
	return keys, nil
}

// literal is v, a property's literal string, or def when v is absent.
func literal(v any, def string) (string, bool) {
	if v == nil {
		return def, true
	}
	s, ok := v.(string)
	return s, ok
}

// createChallengeSecret creates a secret of 64 random characters on the
// Secrets Manager API at endpoint, and returns its ARN.
func createChallengeSecret(ctx context.Context, endpoint string) (string, error) {
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
