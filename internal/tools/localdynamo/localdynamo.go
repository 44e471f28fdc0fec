// Package localdynamo starts a local DynamoDB API server, moto_server (pip install 'moto[server]') or
// dynalite (npm), as a child Process in its own process group, which Stop kills whole.
package localdynamo

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Errors wrapped by Start's: the server's executable is not on PATH, or Options.Server names no server it knows.
var (
	ErrNotInstalled  = errors.New("not installed")
	ErrUnknownServer = errors.New("want moto or dynalite")
)

var installHint = map[string]string{
	"moto":     "install moto: pip install 'moto[server]'",
	"dynalite": "install Node.js and dynalite: make setup installs it into .tools/ and make puts it on PATH",
}

// startTimeout bounds how long the server may take to answer (moto took over 30 s on a busy 2-core machine).
const startTimeout = 2 * time.Minute

// Options choose the server and how it is reached.
type Options struct {
	// Server is "moto" (moto_server; also when empty) or "dynalite".
	Server string

	// Serialize puts a proxy that passes one request at a time in front of the server
	// (Endpoint is the proxy's): moto's conditional writes are not atomic (docs/operations.md).
	Serialize bool
	// Output receives the server's output; nil discards it.
	Output io.Writer
}

// Server is a running server. Stop it with Stop.
type Server struct {
	proc     *Process
	proxy    *http.Server // nil unless Options.Serialize
	endpoint string
	stop     sync.Once
}

// Start starts the server on a loopback port it binds itself (port 0) and waits until it
// answers DynamoDB calls, ctx is done or startTimeout passes; the server runs until Stop.
func Start(ctx context.Context, opts Options) (*Server, error) {
	name, path, args, err := command(cmp.Or(opts.Server, "moto"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	out, found := watchPort(opts.Output)
	cmd.Stdout, cmd.Stderr = out, out
	proc, err := StartProcess(cmd)
	if err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		<-proc.Exited()
		out.Close()
	}()
	s := &Server{proc: proc}
	err = s.ready(ctx, found)
	if err == nil && opts.Serialize {
		err = s.serialize()
	}
	if err != nil {
		if waitErr := proc.Kill(); waitErr != nil {
			err = fmt.Errorf("%w (%v)", err, waitErr)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

// dynaliteScript starts dynalite on port 0 of 127.0.0.1 and prints its command's line with the port.
const dynaliteScript = `const s = require(process.argv[1])({createTableMs: 0, deleteTableMs: 0, updateTableMs: 0});
s.listen(0, '127.0.0.1', () => console.log('Dynalite listening at: http://127.0.0.1:' + s.address().port));`

// command is the command line that starts the server kind on port 0 of 127.0.0.1, and its executable's name.
func command(kind string) (name, path string, args []string, err error) {
	switch kind {
	case "moto":
		name, args = "moto_server", []string{"-H", "127.0.0.1", "-p", "0"}
	case "dynalite":
		name = "dynalite"
	default:
		return "", "", nil, fmt.Errorf("server %q: %w", kind, ErrUnknownServer)
	}
	if path, err = exec.LookPath(name); err != nil {
		return "", "", nil, fmt.Errorf("%s: %w (%s): %w", name, ErrNotInstalled, installHint[kind], err)
	}
	if kind == "moto" {
		return name, path, args, nil
	}
	// dynalite's command line cannot listen on port 0; its module, run by node, can.
	cli, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", "", nil, fmt.Errorf("dynalite: %w", err)
	}
	if path, err = exec.LookPath("node"); err != nil {
		return "", "", nil, fmt.Errorf("node: %w (%s): %w", ErrNotInstalled, installHint[kind], err)
	}
	return name, path, []string{"-e", dynaliteScript, filepath.Dir(cli)}, nil
}

var listening = regexp.MustCompile(`http://(?:127\.0\.0\.1|localhost):(\d+)`)

// watchPort returns a writer passing output on to w (nil discards it), and a channel receiving the first
// http://127.0.0.1:PORT URL's port in it. Close the writer once the server exits.
func watchPort(w io.Writer) (io.WriteCloser, <-chan string) {
	if w == nil {
		w = io.Discard
	}
	r, pw := io.Pipe()
	found := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(io.TeeReader(r, w)) // a line over 64 KiB ends the scan
		for lines.Scan() {
			if m := listening.FindSubmatch(lines.Bytes()); m != nil {
				found <- string(m[1])
				break
			}
		}
		_, _ = io.Copy(w, r)
		r.Close()
	}()
	return pw, found
}

// Proxy starts the proxy of Options.Serialize in front of the DynamoDB API at endpoint, a server
// this process did not start; Endpoint is the proxy's. Stop closes the proxy only.
func Proxy(endpoint string) (*Server, error) {
	s := &Server{endpoint: endpoint}
	if err := s.serialize(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) serialize() error {
	backend, err := url.Parse(s.endpoint)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	proxy, turn := httputil.NewSingleHostReverseProxy(backend), make(chan struct{}, 1)
	s.proxy = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // one request at a time
		case turn <- struct{}{}:
		case <-r.Context().Done():
			http.Error(w, "client gone", http.StatusServiceUnavailable)
			return
		}
		defer func() { <-turn }()
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = s.proxy.Serve(l) }()
	s.endpoint = "http://" + l.Addr().String()
	return nil
}

// IsMoto reports whether the server at endpoint is moto_server: it answers /moto-api/data.json with a JSON object.
func IsMoto(ctx context.Context, endpoint string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/moto-api/data.json", nil)
	if err != nil {
		return false
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var data map[string]json.RawMessage
	return resp.StatusCode == http.StatusOK && json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&data) == nil
}

// Endpoint returns the server's URL (the proxy's, with Options.Serialize).
func (s *Server) Endpoint() string { return s.endpoint }

// Stop closes the proxy, if any, and kills the server if Start started it. Later calls do nothing.
func (s *Server) Stop() {
	s.stop.Do(func() {
		if s.proxy != nil {
			_ = s.proxy.Close()
		}
		if s.proc != nil {
			s.proc.Kill()
		}
	})
}

// ready waits until the server has printed its port (s.endpoint then names it) and answered its first
// DynamoDB call (moto loads its backend then); it gives up when it exits, ctx is done or startTimeout passes.
func (s *Server) ready(ctx context.Context, found <-chan string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	select {
	case port := <-found:
		s.endpoint = "http://127.0.0.1:" + port
	case <-s.proc.Exited():
		return errors.New("exited before listening")
	case <-ctx.Done():
		return fmt.Errorf("not listening: %w", ctx.Err())
	}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, strings.NewReader("{}"))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
		req.Header.Set("X-Amz-Date", "20260101T000000Z")
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: first DynamoDB call: %s", s.endpoint, resp.Status)
			}
			return nil
		}
		select {
		case <-s.proc.Exited():
			return fmt.Errorf("%s: exited before answering", s.endpoint)
		case <-ctx.Done():
			return fmt.Errorf("%s: first DynamoDB call: %w", s.endpoint, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Process is a child process in its own process group, so that Kill reaches whatever it forked
// too; on Linux it also gets SIGKILL if the process that started it dies first.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
	err    error         // cmd.Wait's, set before exited is closed
}

// StartProcess starts cmd, after setting its SysProcAttr, and waits for it in the background. Stop it with Kill.
func StartProcess(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = sysProcAttr()
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	// Pdeathsig fires when the thread that started the child ends: a locked goroutine starts and waits.
	started := make(chan error)
	go func() {
		runtime.LockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			p.err = cmd.Wait()
			close(p.exited)
		}
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Kill kills the process's group with SIGKILL, waits for the process to exit and returns cmd.Wait's error.
func (p *Process) Kill() error {
	kill(p.cmd)
	<-p.exited
	return p.err
}

// ErrNoTTL means the table was created but the DynamoDB API has no TTL operations (dynalite).
var ErrNoTTL = errors.New("localdynamo: the DynamoDB API does not support TTL")

// noTTL wraps err in ErrNoTTL if the server does not know the operation.
func noTTL(err error) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "UnknownOperationException" {
		return fmt.Errorf("%w: %w", ErrNoTTL, err)
	}
	return err
}

// CreateTable creates table as dynamostore.Store expects it (string keys pk and sk, the push index, on demand), waits
// until it is ACTIVE and enables TTL on ttl, idempotently; on a server without TTL the error is ErrNoTTL.
func CreateTable(ctx context.Context, client *dynamodb.Client, table string) error {
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   &table,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("pushList"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("pushTicket"), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
		// dynamostore.PushIndex, as template.yaml declares it.
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String("push"),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("pushList"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("pushTicket"), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("localdynamo: create table %s: %w", table, err)
	}
	// The waiter's default first delay is 20 s; a new on-demand table is ACTIVE within seconds.
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 250 * time.Millisecond
		o.MaxDelay = 5 * time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &table}, 5*time.Minute); err != nil {
		return fmt.Errorf("localdynamo: wait for table %s: %w", table, err)
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
	if err != nil {
		return fmt.Errorf("localdynamo: describe TTL of %s: %w", table, noTTL(err))
	}
	if d := ttl.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == "ttl" &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: &table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String("ttl"),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		return fmt.Errorf("localdynamo: enable TTL on %s: %w", table, noTTL(err))
	}
	return nil
}
