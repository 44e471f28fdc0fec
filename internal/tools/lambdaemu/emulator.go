// Package lambdaemu runs a Lambda function's bootstrap under the AWS Lambda
// Runtime Interface Emulator (aws-lambda-rie, which `make tools` installs) on
// loopback and invokes it, as the Lambda service would.
package lambdaemu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/example/waitingroom/internal/tools/localdynamo"
)

// EnvRIE names the variable that may give the emulator's path.
const EnvRIE = "AWS_LAMBDA_RIE"

// startTimeout bounds how long the emulator may take to listen.
const startTimeout = time.Minute

// Find returns the path of aws-lambda-rie: $AWS_LAMBDA_RIE if set, else the
// one on PATH, else the newest one `make tools` installed under dir/.tools.
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
	matches, _ := filepath.Glob(filepath.Join(dir, ".tools", "aws-lambda-rie", "*", "aws-lambda-rie"))
	if len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	return "", fmt.Errorf("aws-lambda-rie is not on PATH nor under %s: run `make tools` (or set %s)",
		filepath.Join(dir, ".tools"), EnvRIE)
}

// Emulator is one emulator process serving one bootstrap.
type Emulator struct {
	url  string
	proc *localdynamo.Process // in its own process group, with the bootstrap
	turn sync.Mutex           // the emulator crashes on concurrent invocations
}

// Start runs rie serving the executable bootstrap with env added to this
// process's environment, on free loopback ports. Its output, and the
// function's, goes to out. Stop it with Stop.
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
	// rie cannot listen on port 0: when another process takes a free port
	// first, rie exits, and a new pair is tried.
	for attempt := 1; ; attempt++ {
		e, err := start(rie, bootstrap, env, out)
		if !errors.Is(err, errExited) || attempt == 3 {
			return e, err
		}
	}
}

// errExited is start's error when rie exits before it listens.
var errExited = errors.New("aws-lambda-rie exited before listening")

func start(rie, bootstrap string, env []string, out io.Writer) (*Emulator, error) {
	// The invoke API's port, and the Runtime API's (by default 9001, which
	// a second emulator would collide on).
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	runtimeAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	// Its own chatter at warn and above only: out is the function's logs.
	cmd := exec.Command(rie,
		"--log-level", "warn",
		"--runtime-interface-emulator-address", addr,
		"--runtime-api-address", runtimeAddr,
		bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	proc, err := localdynamo.StartProcess(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", rie, err)
	}
	e := &Emulator{
		url:  "http://" + addr + "/2015-03-31/functions/function/invocations",
		proc: proc,
	}
	if err := e.waitListening(addr); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

func (e *Emulator) waitListening(addr string) error {
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-e.proc.Exited():
			return errExited
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("aws-lambda-rie not listening on %s after %s", addr, startTimeout)
}

// Invoke sends event to the function and returns its response payload.
// The first call starts the bootstrap (the cold start). Calls take turns.
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

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr() (string, error) {
	port, err := localdynamo.FreePort()
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	return "127.0.0.1:" + strconv.Itoa(port), nil
}
