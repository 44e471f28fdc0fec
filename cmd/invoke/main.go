// Command invoke runs one sample event through a real function bootstrap
// under the AWS Lambda Runtime Interface Emulator, with the function and
// environment template.yaml gives it, and prints the function's response
// (`make invoke EVENT=events/enter.json`).
//
// Without DYNAMODB_ENDPOINT it starts a throwaway moto_server with
// internal/localdynamo; either way it creates the table if missing, seeds
// the state the sample events refer to (internal/sampleevents) unless
// -seed=false, and creates a KMS key for the admission passes there (so
// that endpoint must serve KMS too, as moto_server does).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/lambdaemu"
	"github.com/example/waitingroom/internal/localdynamo"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/sampleevents"
	"github.com/example/waitingroom/internal/samtemplate"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "invoke:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("invoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rie := fs.String("rie", "", "path of aws-lambda-rie (default: $AWS_LAMBDA_RIE, PATH, then .tools)")
	binDir := fs.String("bin", "bin", "directory holding <function>/bootstrap built for this machine (make bootstrap)")
	tplPath := fs.String("template", "template.yaml", "SAM template")
	function := fs.String("function", "", "logical id of the function (default: the one API Gateway routes the event's method and path to)")
	endpoint := fs.String("endpoint", os.Getenv(config.EnvDynamoEndpoint), "DynamoDB endpoint (default $"+config.EnvDynamoEndpoint+"; empty: start moto_server)")
	table := fs.String("table", "waitingroom-local", "table name")
	seed := fs.Bool("seed", true, "seed the program and tokens the sample events use")
	verbose := fs.Bool("v", false, "also say which server, function and route it uses")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: invoke [flags] EVENT.json\n\nRuns the event through the function's real bootstrap under aws-lambda-rie and prints the response.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	logf := func(format string, args ...any) {
		if *verbose {
			fmt.Fprintf(stderr, format+"\n", args...)
		}
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("want one event file")
	}
	event, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	tpl, err := samtemplate.Load(*tplPath)
	if err != nil {
		return err
	}
	if *function == "" {
		route := ""
		if route, *function, err = functionFor(tpl, event); err != nil {
			return err
		}
		logf("invoke: route %s", route)
	}
	if *rie == "" {
		if *rie, err = lambdaemu.Find("."); err != nil {
			return err
		}
	}

	if *endpoint == "" {
		moto, err := localdynamo.Start(ctx, localdynamo.Options{Server: "moto", Serialize: true})
		if err != nil {
			return fmt.Errorf("no %s: %w", config.EnvDynamoEndpoint, err)
		}
		defer moto.Stop()
		*endpoint = moto.Endpoint()
		logf("invoke: moto_server on %s", *endpoint)
	}
	client, err := dynamostore.NewClient(ctx, *endpoint)
	if err != nil {
		return err
	}
	if err := dynamostore.CreateTable(ctx, client, *table); err != nil {
		return err
	}
	if *seed {
		err := sampleevents.Seed(ctx, dynamostore.New(client, *table), time.Now())
		if err != nil && !errors.Is(err, queue.ErrConflict) { // seeded before: fine
			return err
		}
	}

	res := lambdaemu.Resources{Endpoint: *endpoint, Table: *table}
	if lambdaemu.NeedsPassKey(tpl) {
		if res.PassKey, err = lambdaemu.CreatePassKey(ctx, *endpoint); err != nil {
			return err
		}
		logf("invoke: pass key %s", res.PassKey)
	}
	env, err := lambdaemu.FunctionEnv(tpl, *function, res)
	if err != nil {
		return err
	}
	bootstrap := filepath.Join(*binDir, filepath.Base(samtemplate.MainPackage(*function)), "bootstrap")
	logf("invoke: %s (%s) with %s", *function, bootstrap, fs.Arg(0))
	emu, err := lambdaemu.Start(*rie, bootstrap, env, stderr)
	if err != nil {
		return err
	}
	defer emu.Stop()
	resp, err := emu.Invoke(ctx, event)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if json.Indent(&out, resp, "", "  ") != nil {
		out.Reset()
		out.Write(resp)
	}
	fmt.Fprintln(stdout, out.String())
	return nil
}

// functionFor returns the route and function that API Gateway would invoke
// for the event: by its method and path, as samtemplate.RouteFor ranks the
// template's routes (its routeKey is what API Gateway would write, not what
// it reads).
func functionFor(tpl *samtemplate.Template, event []byte) (route, function string, err error) {
	var e events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(event, &e); err != nil {
		return "", "", fmt.Errorf("event: %w", err)
	}
	path := e.RawPath
	if path == "" {
		path = e.RequestContext.HTTP.Path
	}
	if e.RequestContext.HTTP.Method == "" || path == "" {
		return "", "", errors.New("event: no requestContext.http.method or rawPath: not an HTTP API (payload 2.0) event (use -function)")
	}
	return tpl.RouteFor(e.RequestContext.HTTP.Method, path)
}
