// Package lambdaemu runs a Lambda function's bootstrap under the AWS Lambda Runtime Interface Emulator
// (aws-lambda-rie, which `make tools` installs) on loopback and invokes it, as the Lambda service would.
package lambdaemu

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/awsconfig"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/tools/localdynamo"
	"github.com/example/waitingroom/internal/tools/localkms"
	"github.com/example/waitingroom/internal/tools/samtemplate"
)

const (
	EnvRIE       = "AWS_LAMBDA_RIE" // EnvRIE names the variable that may give the emulator's path.
	startTimeout = time.Minute      // how long the emulator may take to listen
)

// Find returns the path of aws-lambda-rie: $AWS_LAMBDA_RIE if set, else the one on PATH,
// else the newest one `make tools` installed under dir/.tools.
func Find(dir string) (string, error) {
	if p := os.Getenv(EnvRIE); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvRIE, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("aws-lambda-rie"); err == nil {
		return p, nil
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".tools", "aws-lambda-rie", "*", "aws-lambda-rie")); len(m) > 0 {
		return m[len(m)-1], nil
	}
	return "", fmt.Errorf("aws-lambda-rie is not on PATH nor under %s: run `make tools` (or set %s)", filepath.Join(dir, ".tools"), EnvRIE)
}

// Emulator is one emulator process serving one bootstrap.
type Emulator struct {
	url  string
	proc *localdynamo.Process // in its own process group, with the bootstrap
	turn sync.Mutex           // the emulator crashes on concurrent invocations
}

// Start runs rie serving the executable bootstrap with env added to this process's environment,
// on free loopback ports; its output and the function's go to out. Stop it with Stop.
func Start(rie, bootstrap string, env []string, out io.Writer) (*Emulator, error) {
	bootstrap, err := filepath.Abs(bootstrap)
	if err != nil {
		return nil, err
	}
	if strings.ContainsRune(rie, filepath.Separator) { // else found on PATH
		if rie, err = filepath.Abs(rie); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(bootstrap); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	// rie cannot listen on port 0: when another process takes a free port first, rie exits; try new ones.
	for attempt := 1; ; attempt++ {
		e, err := start(rie, bootstrap, env, out)
		if !errors.Is(err, errExited) || attempt == 3 {
			return e, err
		}
	}
}

var errExited = errors.New("aws-lambda-rie exited before listening")

func start(rie, bootstrap string, env []string, out io.Writer) (*Emulator, error) {
	// The invoke API's port, and the Runtime API's (by default 9001, which a second emulator would collide on).
	addrs, err := freeAddrs()
	if err != nil {
		return nil, err
	}
	// Its own chatter at warn and above only: out is the function's logs.
	cmd := exec.Command(rie, "--log-level", "warn", "--runtime-interface-emulator-address", addrs[0],
		"--runtime-api-address", addrs[1], bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	proc, err := localdynamo.StartProcess(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", rie, err)
	}
	e := &Emulator{url: "http://" + addrs[0] + "/2015-03-31/functions/function/invocations", proc: proc}
	if err := e.waitListening(addrs[0]); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

func (e *Emulator) waitListening(addr string) error {
	for deadline := time.Now().Add(startTimeout); time.Now().Before(deadline); {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-e.proc.Exited():
			return errExited
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("aws-lambda-rie not listening on %s after %s", addr, startTimeout)
}

// Invoke sends event to the function and returns its response payload; the first call starts the
// bootstrap (the cold start). Calls take turns.
func (e *Emulator) Invoke(ctx context.Context, event []byte) ([]byte, error) {
	e.turn.Lock()
	defer e.turn.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(event))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("invoke: read response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("invoke: emulator answered %s: %s", resp.Status, body)
	}
	// A function error comes back as 200 with an error object.
	var fnErr struct {
		ErrorType    string `json:"errorType"`
		ErrorMessage string `json:"errorMessage"`
	}
	if json.Unmarshal(body, &fnErr) == nil && fnErr.ErrorMessage != "" {
		return body, fmt.Errorf("invoke: function error %s: %s", fnErr.ErrorType, fnErr.ErrorMessage)
	}
	return body, nil
}

// Stop ends the bootstrap and the emulator that started it.
func (e *Emulator) Stop() { e.proc.Kill() }

// freeAddrs returns two loopback addresses with distinct ports that were free a moment ago.
func freeAddrs() ([2]string, error) {
	var addrs [2]string
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return addrs, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		addrs[i] = l.Addr().String()
	}
	return addrs, nil
}

// Resources stand in, on loopback, for the template's: a DynamoDB table, KMS keys and a secret,
// on one endpoint (moto_server serves them all).
type Resources struct {
	Endpoint        string            // the DynamoDB, KMS and Secrets Manager API
	Table           string            // stands for each AWS::DynamoDB::Table
	KMSKeys         map[string]string // by AWS::KMS::Key logical id, a key of the same spec and usage on Endpoint
	KMSEndpoint     string            // the KMS API the functions call: a localkms.Proxy in front of Endpoint; "" for Endpoint
	ChallengeSecret string            // the ARN of a secret on Endpoint standing for each AWS::SecretsManager::Secret
}

// kmsVariables are the variables that name a KMS key: a function with one gets KMS_ENDPOINT.
var kmsVariables = []string{config.EnvPassWrapKMSKeyID, config.EnvShuffleKMSKeyID}

// FunctionEnv returns the environment for running function id of tpl against r, as `sam local` would
// set it: the template's variables with r's resources, the endpoints it needs, its name, timeout and memory.
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
	for k, n := range map[string]int{"AWS_LAMBDA_FUNCTION_TIMEOUT": f.Timeout, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": f.MemorySize} {
		if n > 0 {
			vars[k] = strconv.Itoa(n)
		}
	}
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		vars["AWS_REGION"] = "us-east-1"
	}
	var env []string
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	return env, nil
}

// Provide stands in for tpl's resources on endpoint, for FunctionEnv: table for its tables, a key for
// each AWS::KMS::Key, reached through a localkms.Proxy, and a secret for each AWS::SecretsManager::Secret.
// Close the proxy (nil when tpl has no KMS key) once the functions are done.
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

// createKMSKeys creates on endpoint a key for each AWS::KMS::Key of tpl with its KeySpec and KeyUsage
// (CloudFormation's defaults when it names none), and returns their ids by logical id.
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
		out, err := client.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: types.KeySpec(spec), KeyUsage: types.KeyUsageType(usage),
			Description: aws.String("waiting room " + id + " (local)")})
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

// createChallengeSecret creates a secret of 64 random characters on endpoint and returns its ARN.
func createChallengeSecret(ctx context.Context, endpoint string) (string, error) {
	cfg, err := awsconfig.Load(ctx, endpoint)
	if err != nil {
		return "", err
	}
	out, err := secretsmanager.NewFromConfig(cfg).CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("waitingroom-challenge-" + rand.Text()),
		SecretString: aws.String(rand.Text() + rand.Text() + rand.Text()[:12])})
	if err != nil {
		return "", fmt.Errorf("create the challenge secret on the Secrets Manager API at %s (moto_server serves it): %w", endpoint, err)
	}
	return aws.ToString(out.ARN), nil
}
