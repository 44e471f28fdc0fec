package emulator

import (
	"os"
	"sort"
	"strconv"

	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/testing/samtemplate"
)

// FunctionEnv returns the environment for running function id of tpl
// against table at a local DynamoDB endpoint, as `sam local` would set it:
// the template's variables (parameters at their defaults, the table's !Ref
// as table), DYNAMODB_ENDPOINT, and the function's name, timeout and memory
// size for the emulator.
func FunctionEnv(tpl *samtemplate.Template, id, table, endpoint string) ([]string, error) {
	f, err := tpl.Function(id)
	if err != nil {
		return nil, err
	}
	vars, err := tpl.Env(id, tpl.TableRefs(table))
	if err != nil {
		return nil, err
	}
	vars[config.EnvDynamoEndpoint] = endpoint
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
