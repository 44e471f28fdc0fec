// Command invoke runs one sample event through a real function bootstrap under the AWS Lambda Runtime
// Interface Emulator, as template.yaml configures it, and prints the response (`make invoke EVENT=events/enter.json`),
// against DYNAMODB_ENDPOINT or a throwaway moto_server, with the sample events' state seeded (unless -seed=false).
package main

import (
	"bytes"
	"cmp"
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
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/lambdaemu"
	"github.com/example/waitingroom/internal/tools/localdynamo"
	"github.com/example/waitingroom/internal/tools/sampleevents"
	"github.com/example/waitingroom/internal/tools/samtemplate"
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

type options struct {
	rie, binDir, template, function string
	endpoint, table                 string
	seed, verbose                   bool
	eventFile                       string
}

// run invokes the event file args name with the function it is routed to and prints the response to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("invoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.rie, "rie", "", "path of aws-lambda-rie (default: $AWS_LAMBDA_RIE, PATH, then .tools)")
	fs.StringVar(&o.binDir, "bin", "bin", "directory holding <function>/bootstrap built for this machine (make bootstrap)")
	fs.StringVar(&o.template, "template", "template.yaml", "SAM template")
	fs.StringVar(&o.function, "function", "", "logical id of the function (default: the one API Gateway routes the event's method and path to)")
	fs.StringVar(&o.endpoint, "endpoint", os.Getenv(config.EnvDynamoEndpoint), "DynamoDB endpoint (default $"+config.EnvDynamoEndpoint+"; empty: start moto_server)")
	fs.StringVar(&o.table, "table", "waitingroom-local", "table name")
	fs.BoolVar(&o.seed, "seed", true, "seed the program and tokens the sample events use")
	fs.BoolVar(&o.verbose, "v", false, "also say which server, function and route it uses")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: invoke [flags] EVENT.json\n\nRuns the event through the function's real bootstrap under aws-lambda-rie and prints the response.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("want one event file")
	}
	o.eventFile = fs.Arg(0)
	logf := func(format string, args ...any) {
		if o.verbose {
			fmt.Fprintf(stderr, format+"\n", args...)
		}
	}
	event, err := os.ReadFile(o.eventFile)
	if err != nil {
		return err
	}
	tpl, err := samtemplate.Load(o.template)
	if err != nil {
		return err
	}
	if o.function == "" {
		route := ""
		if route, o.function, err = functionFor(tpl, event); err != nil {
			return err
		}
		logf("invoke: route %s", route)
	}
	if o.rie == "" {
		if o.rie, err = lambdaemu.Find("."); err != nil {
			return err
		}
	}
	resp, err := invoke(ctx, o, tpl, event, stderr, logf)
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

// invoke runs o.function's bootstrap under the emulator against o.endpoint (else a moto_server it starts),
// with the table and the template's other resources prepared, and returns its response to event.
func invoke(ctx context.Context, o options, tpl *samtemplate.Template, event []byte, logs io.Writer, logf func(string, ...any)) ([]byte, error) {
	if o.endpoint == "" {
		moto, err := localdynamo.Start(ctx, localdynamo.Options{Server: "moto", Serialize: true})
		if err != nil {
			return nil, fmt.Errorf("no %s: %w", config.EnvDynamoEndpoint, err)
		}
		defer moto.Stop()
		o.endpoint = moto.Endpoint()
		logf("invoke: moto_server on %s", o.endpoint)
	}
	client, err := dynamostore.NewClient(ctx, o.endpoint)
	if err != nil {
		return nil, err
	}
	if err := localdynamo.CreateTable(ctx, client, o.table); err != nil {
		return nil, err
	}
	if o.seed {
		err := sampleevents.Seed(ctx, dynamostore.New(client, o.table), time.Now())
		if err != nil && !errors.Is(err, queue.ErrConflict) { // seeded before: fine
			return nil, err
		}
	}
	res, proxy, err := lambdaemu.Provide(ctx, tpl, o.endpoint, o.table)
	if err != nil {
		return nil, err
	}
	if proxy != nil {
		defer proxy.Close()
		logf("invoke: KMS keys %v, KMS (with GenerateDataKeyPair) on %s", res.KMSKeys, res.KMSEndpoint)
	}
	env, err := lambdaemu.FunctionEnv(tpl, o.function, res)
	if err != nil {
		return nil, err
	}
	env = append(env, config.EnvMetricsInterval+"=0") // the invocation's metrics line, as it answers
	bootstrap := filepath.Join(o.binDir, filepath.Base(samtemplate.MainPackage(o.function)), "bootstrap")
	logf("invoke: %s (%s) with %s", o.function, bootstrap, o.eventFile)
	emu, err := lambdaemu.Start(o.rie, bootstrap, env, logs)
	if err != nil {
		return nil, err
	}
	defer emu.Stop()
	return emu.Invoke(ctx, event)
}

// functionFor returns the route and function that API Gateway would invoke for the event's method and path.
func functionFor(tpl *samtemplate.Template, event []byte) (route, function string, err error) {
	var e events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(event, &e); err != nil {
		return "", "", fmt.Errorf("event: %w", err)
	}
	path := cmp.Or(e.RawPath, e.RequestContext.HTTP.Path)
	if e.RequestContext.HTTP.Method == "" || path == "" {
		return "", "", errors.New("event: no requestContext.http.method or rawPath: not an HTTP API (payload 2.0) event (use -function)")
	}
	return tpl.RouteFor(e.RequestContext.HTTP.Method, path)
}
