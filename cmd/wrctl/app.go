package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"
	"github.com/jonboulle/clockwork"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/tools/client"
)

// errUsage is a command line wrctl could not make sense of (exit status
// 2), already explained.
var errUsage = errors.New("usage")

// usageError prints msg for command cmd ("" for wrctl's own) and where its
// help is, in two lines, and returns errUsage.
func (a *app) usageError(cmd, msg string) error {
	prog := strings.TrimSpace("wrctl " + cmd)
	fmt.Fprintf(a.stderr, "%s: %s\nRun \"%s -h\" for usage.\n", prog, msg, prog)
	return errUsage
}

// defaultURL is the local server's address (make run).
const defaultURL = "http://127.0.0.1:3000"

const usage = `Usage: wrctl COMMAND [flags] ID [N]

Runs a waiting room's program during an on-sale, through the admin API.

Commands:
  list          every program, a row each
  get ID        the program's counters and settings
  put ID        create the program, or change the settings given as flags
  admit ID N    admit N more people now, on top of the admission rate
  passes ID     bypass passes for staff and guests, one per line (-n, -valid)
  pause ID      stop admission           resume ID   restart it
  close ID      stop new entries         reopen ID   take them again
  watch ID      a live view of the crowd, refreshed every second
  check ID      what may go wrong at the announced load (-expect N), line by line
  history ID    the program's admin changes, newest first, with who made them
  delete ID     delete a closed program, its id taken for 7 days (asks to type it again, or -yes)
  token ID TOKEN   where a token stands, as its holder would see it
  revoke ID TOKEN  revoke a token: no place, no admission, no pass
  keys             the keys that sign the passes, newest first
  keys rotate      a new signing key, which signs from 15 minutes on
  keys revoke KID  revoke a signing key (asks to type the kid again, or -yes)

Every command takes -url (default $WR_URL, else ` + defaultURL + `), -json,
-timeout, -region and -profile, before the command or after it. A 429 or
BUSY answer is retried after its Retry-After, another 503 too but for admit,
passes and keys rotate.
Authentication: with ADMIN_TOKEN set, the local server's bearer token (only
over https or to a loopback host); otherwise a SigV4 signature with your
AWS credentials (the SDK's default chain: AWS_PROFILE, AWS_ACCESS_KEY_ID,
SSO, …), for the region of the API's host or -region.
Run "wrctl COMMAND -h" for a command's flags.
`

// app is one run of wrctl and its outside world.
type app struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	clock  clockwork.Clock // a fake one in tests
	// sleep waits before a retry (client.Retry.Sleep; nil: the real clock).
	sleep    func(ctx context.Context, d time.Duration) error
	terminal bool
	// transport carries the requests; nil for http.DefaultTransport.
	transport http.RoundTripper
}

func newApp(getenv func(string) string, stdout, stderr io.Writer) *app {
	return &app{getenv: getenv, stdin: strings.NewReader(""), stdout: stdout, stderr: stderr, clock: clockwork.NewRealClock(), terminal: isTerminal(stdout)}
}

// command is a subcommand: its arguments, its own flags, and what it does.
type command struct {
	args     []string // names of the positional arguments
	synopsis string
	sampling bool // sends each request once: the next sample is the retry (watch)
	// valid checks the positional arguments before anything is sent (nil:
	// any); its error is a usage error.
	valid func(args []string) error
	// run runs a command without flags of its own; flags, for one with,
	// registers them and returns what runs it.
	run   func(a *app, ctx context.Context, c *call) error
	flags func(a *app, fs *flag.FlagSet) func(ctx context.Context, c *call) error
}

// call is what a command runs with.
type call struct {
	client *client.Client
	json   bool
	args   []string
	url    string
}

func (a *app) commands() map[string]command {
	toggle := func(set api.ProgramSettings, synopsis string) command {
		return command{args: []string{"ID"}, synopsis: synopsis,
			run: func(a *app, ctx context.Context, c *call) error { return a.put(ctx, c, set) }}
	}
	return map[string]command{
		"get": {args: []string{"ID"}, synopsis: "Prints the program's counters and settings.", run: (*app).get},
		"put": {args: []string{"ID"}, synopsis: "Creates the program, or changes the settings given as flags (and only those).",
			flags: func(a *app, fs *flag.FlagSet) func(context.Context, *call) error {
				settings := registerSettings(fs, a.clock.Now)
				return func(ctx context.Context, c *call) error {
					set, err := settings()
					if err != nil {
						return err
					}
					return a.put(ctx, c, set)
				}
			}},
		"admit": {args: []string{"ID", "N"}, synopsis: "Admits N more of the people waiting now, on top of the admission rate.", valid: validAdmit,
			run: (*app).admit},
		"passes": {args: []string{"ID"}, synopsis: "Issues bypass passes: each lets one person into the program's site without queueing,\nuntil it expires; under maxActiveUsers each holds a slot until then. Prints one per line.",
			flags: func(a *app, fs *flag.FlagSet) func(context.Context, *call) error {
				n := fs.Int64("n", 1, "how many passes (1 to 1000)")
				valid := fs.Duration("valid", time.Hour, "how long each pass is valid, whole seconds from 1m to 24h")
				return func(ctx context.Context, c *call) error { return a.passes(ctx, c, *n, *valid) }
			}},
		"pause":  toggle(api.ProgramSettings{Paused: new(true)}, "Stops admission; people keep their place."),
		"resume": toggle(api.ProgramSettings{Paused: new(false)}, "Restarts admission at the program's rate."),
		"close":  toggle(api.ProgramSettings{Closed: new(true)}, "Stops new entries; people already waiting keep their place."),
		"reopen": toggle(api.ProgramSettings{Closed: new(false)}, "Takes new entries again."),
		"token": {args: []string{"ID", "TOKEN"}, synopsis: "Prints where the token stands, as its holder would see it (never the pass), and its times.",
			run: (*app).token},
		"revoke": {args: []string{"ID", "TOKEN"}, synopsis: "Revokes the token: it reads REVOKED, with no place, admission or pass.\nA pass already handed out stays valid offline until it expires.",
			run: (*app).revoke},
		"watch": {args: []string{"ID"}, sampling: true, synopsis: "Shows the crowd live: issued, admitted, waiting, the rate, when the last person in line gets in,\nenters/s and admissions/s, and the queue length over time. Redraws in place on a terminal;\nprints one line per sample otherwise (one JSON object per line with -json).",
			flags: func(a *app, fs *flag.FlagSet) func(context.Context, *call) error {
				var w watchOptions
				fs.DurationVar(&w.every, "every", time.Second, "time between samples")
				fs.DurationVar(&w.forDur, "for", 0, "stop after this `duration` (0: until interrupted)")
				fs.IntVar(&w.count, "n", 0, "stop after this many samples (0: until interrupted)")
				return func(ctx context.Context, c *call) error { return a.watch(ctx, c, w) }
			}},
		"list": {args: nil, synopsis: "Prints every program: waiting, admitted, issued, rate and state.", flags: (*app).listCommand},
		"history": {args: []string{"ID"}, synopsis: "Prints the program's admin changes, newest first: when, when in effect, who, what.",
			flags: (*app).historyCommand},
		"delete": {args: []string{"ID"}, synopsis: "Deletes a closed program: it is gone everywhere, and its id stays taken for 7 days, on the\nlocal server too (a put of it answers PROGRAM_DELETED). Asks you to type the id again, unless -yes\nis given.",
			flags: (*app).deleteCommand},
		"keys": {args: nil, synopsis: "Prints the keys that sign the admission passes, newest first: their kid, state (next, signing,\npublished, retired, revoked, unusable), when each signs from, was made and was revoked.\nSubcommands: \"wrctl keys rotate\", \"wrctl keys revoke KID\".",
			run: (*app).keys},
		"keys rotate": {args: nil, synopsis: "Makes a new signing key: in the JWKS within a minute, it signs from 15 minutes on (once sites\ncan have it) until the next scheduled key; until it signs, a rotation answers it again and makes none.\nNot repeated after a 503: run \"wrctl keys\" to see whether it was made.",
			run: (*app).rotateKey},
		"keys revoke": {args: []string{"KID"}, synopsis: "Revokes a signing key (a leaked one): it leaves the JWKS and signs no more on every instance within\na minute, and sites refuse its passes once their cached JWKS expires (within about 6 minutes);\nwhen it was the key that signs, a new key signs in its place. Asks you to type the kid again,\nunless -yes is given.",
			flags: (*app).revokeKeyCommand},
		"check": {args: []string{"ID"}, synopsis: "Reads the program and says, line by line (OK, WARN, FAIL, and what to do), what may go wrong\nat the announced load, following the pre-sale checklist of docs/operations.md. Exits with\nstatus 1 when any check FAILs.",
			flags: (*app).checkCommand},
	}
}

// globals are the flags every command takes, before the command or after.
type globals struct {
	url, region, profile string
	json                 bool
	timeout              time.Duration
}

// flagSet is the flag set of command name with g's flags, each defaulting
// to its value in g. It prints nothing: run explains a parse error.
func (g *globals) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&g.url, "url", g.url, "base `URL` of the waiting room's API ($WR_URL)")
	fs.BoolVar(&g.json, "json", g.json, "machine-readable output: the API's JSON (check: one finding a line)")
	fs.StringVar(&g.region, "region", g.region, "AWS `region` to sign for (default: the API host's, else the AWS configuration's)")
	fs.StringVar(&g.profile, "profile", g.profile, "AWS shared configuration `profile` (default $AWS_PROFILE)")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "time limit of each request")
	return fs
}

// Retries of a request the server could not serve now (client.Retry).
const (
	attempts     = 4
	maxRetryWait = 10 * time.Second
)

// run parses args and runs the command they name.
func (a *app) run(ctx context.Context, args []string) error {
	g := globals{url: cmp.Or(a.getenv("WR_URL"), defaultURL), timeout: 30 * time.Second}
	name, args, err := a.commandOf(&g, args)
	if err != nil {
		return err
	}
	cmd := a.commands()[name]
	fs := g.flagSet("wrctl " + name)
	runCmd := func(ctx context.Context, c *call) error { return cmd.run(a, ctx, c) }
	if cmd.flags != nil {
		runCmd = cmd.flags(a, fs)
	}
	args, err = parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(a.stderr)
		fmt.Fprintf(a.stderr, "Usage: wrctl %s [flags] %s\n\n%s\n\nFlags:\n", name, strings.Join(cmd.args, " "), cmd.synopsis)
		fs.PrintDefaults()
		return err
	} else if err != nil {
		return a.usageError(name, err.Error())
	}
	if len(args) != len(cmd.args) {
		want := strings.Join(cmd.args, " ")
		if want == "" {
			want = "no arguments"
		}
		return a.usageError(name, fmt.Sprintf("want %s, got %d argument(s)", want, len(args)))
	}
	if cmd.valid != nil {
		if err := cmd.valid(args); err != nil {
			return a.usageError(name, err.Error())
		}
	}
	c := &call{args: args, url: g.url, json: g.json}
	auth, err := a.authorizer(ctx, c.url, g.region, g.profile)
	if err != nil {
		return err
	}
	_, bearer := auth.(client.BearerToken)
	opts := []client.Option{client.WithAuth(auth), client.WithHTTPClient(newHTTPClient(g.timeout, a.transport))}
	if !cmd.sampling {
		opts = append(opts, client.WithRetry(client.Retry{Attempts: attempts, MaxWait: maxRetryWait, Notify: func(e *client.Error, wait time.Duration, attempt int) {
			fmt.Fprintf(a.stderr, "wrctl: %v; retrying in %v (%d of %d)\n", e, wait, attempt, attempts-1)
		}, Sleep: a.sleep}))
	}
	c.client, err = client.New(c.url, opts...)
	if err != nil {
		return urlHint(err, c.url, bearer)
	}
	return connectHint(a.explain(runCmd(ctx, c), bearer), c.url)
}

// commandOf parses the flags before the command into g and returns the
// command's name (one word or two: keys rotate) and the arguments after it.
func (a *app) commandOf(g *globals, args []string) (string, []string, error) {
	pre := g.flagSet("wrctl")
	if err := pre.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(a.stdout, usage)
		return "", nil, err
	} else if err != nil {
		return "", nil, a.usageError("", err.Error())
	}
	args = pre.Args()
	switch {
	case len(args) == 0:
		fmt.Fprint(a.stderr, usage)
		return "", nil, errUsage
	case args[0] == "help":
		fmt.Fprint(a.stdout, usage)
		return "", nil, flag.ErrHelp
	}
	name := args[0]
	if len(args) > 1 {
		if _, ok := a.commands()[name+" "+args[1]]; ok {
			name, args = name+" "+args[1], args[1:]
		}
	}
	if _, ok := a.commands()[name]; !ok {
		names := slices.DeleteFunc(slices.Sorted(maps.Keys(a.commands())), func(n string) bool { return strings.Contains(n, " ") })
		return "", nil, a.usageError("", fmt.Sprintf("unknown command %q (commands: %s)", name, strings.Join(names, ", ")))
	}
	return name, args[1:], nil
}

// urlHint adds, to an API URL that client.New refused, what to give
// instead: a scheme (http:// for a loopback host, else https://), or https
// for a bearer token that would cross the network in clear text.
func urlHint(err error, apiURL string, bearer bool) error {
	if !strings.Contains(apiURL, "://") {
		scheme := "https://"
		if host, _, _ := strings.Cut(apiURL, "/"); client.Loopback(host) {
			scheme = "http://"
		}
		return fmt.Errorf("%w\n(a URL starts with its scheme: -url %s%s)", err, scheme, apiURL)
	}
	if u, perr := url.Parse(apiURL); bearer && perr == nil && u.Scheme == "http" && u.Host != "" && !client.Loopback(u.Host) {
		return fmt.Errorf("%w\n(ADMIN_TOKEN is set: give an https -url, or unset it to sign with AWS credentials)", err)
	}
	return err
}

// connectHint adds, to a connection refused by a loopback host, how to
// start the local server there.
func connectHint(err error, apiURL string) error {
	u, perr := url.Parse(apiURL)
	if !errors.Is(err, syscall.ECONNREFUSED) || perr != nil || !client.Loopback(u.Host) {
		return err
	}
	start := "make run"
	port := cmp.Or(u.Port(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	if addr := net.JoinHostPort(u.Hostname(), port); addr != strings.TrimPrefix(defaultURL, "http://") {
		start += " ADDR=" + addr
	}
	return fmt.Errorf("%w\n(no server at %s: start the local one with %s at the repository's root, or give -url or WR_URL)", err, apiURL, start)
}

// parseInterspersed parses flags placed before, between and after the
// positional arguments (wrctl put gala -rate 5), which it returns. A token
// id or kid that starts with '-' (base64url, one in 64) is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		for len(args) > 0 && isDashedID(fs, args[0]) {
			positional, args = append(positional, args[0]), args[1:]
		}
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// isDashedID reports whether arg is an id the service makes (a token id or
// a kid: 22 or 43 base64url characters) that starts with '-' and names no
// flag of fs.
func isDashedID(fs *flag.FlagSet, arg string) bool {
	if !strings.HasPrefix(arg, "-") || (len(arg) != 22 && len(arg) != 43) || fs.Lookup(strings.TrimLeft(arg, "-")) != nil {
		return false
	}
	return strings.Trim(arg, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == ""
}

// authorizer picks the bearer token (ADMIN_TOKEN) or SigV4 with the AWS
// SDK's default credential chain.
func (a *app) authorizer(ctx context.Context, apiURL, region, profile string) (client.Authorizer, error) {
	if tok := a.getenv("ADMIN_TOKEN"); tok != "" {
		return client.BearerToken(tok), nil
	}
	if region == "" {
		if u, err := url.Parse(apiURL); err == nil {
			region, _ = client.RegionFromHost(u.Host)
		}
	}
	// The SDK's warnings would clutter the answer; failures are errors.
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithLogger(logging.Nop{})}
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	if profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(profile))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("no AWS region to sign for: the API's host %s names none; give -region or set AWS_REGION (or set ADMIN_TOKEN for the local server)", apiURL)
	}
	return client.SigV4{Credentials: cfg.Credentials, Region: cfg.Region}, nil
}

var unknownField = regexp.MustCompile(`^Unknown field "([^"]+)"`)

// explain adds what the operator can do about an API error; bearer says
// whether the request carried ADMIN_TOKEN.
func (a *app) explain(err error, bearer bool) error {
	var ae *client.Error
	if !errors.As(err, &ae) {
		return err
	}
	switch {
	case ae.Code == api.CodeInvalidJSON && unknownField.MatchString(ae.Message):
		field := unknownField.FindStringSubmatch(ae.Message)[1]
		if f := flagOf(field); f != "" {
			return fmt.Errorf("%w\n(this server does not know -%s yet: it runs an older version than wrctl)", err, f)
		}
	case (ae.Status == http.StatusUnauthorized || ae.Code == api.CodeForbidden) && !bearer:
		return fmt.Errorf("%w\n(the local server takes a bearer token: set ADMIN_TOKEN to the one it printed)", err)
	case ae.Status == http.StatusForbidden && ae.Code == "" && bearer:
		return fmt.Errorf("%w\n(an API on AWS takes requests signed with AWS credentials: unset ADMIN_TOKEN)", err)
	case ae.Code == api.CodeNoKeyring:
		return fmt.Errorf("%w\n(a fixed key is rotated as docs/admission-pass.md says, \"Rotating the key\")", err)
	case ae.Status == http.StatusForbidden && ae.Code == "" && !bearer:
		return fmt.Errorf("%w\n(check that your AWS identity may execute-api:Invoke the admin routes, and the -region)", err)
	}
	return err
}

// newHTTPClient is the client of every request, through transport (nil
// for http.DefaultTransport). It follows no redirect, which would carry
// the credentials elsewhere.
func newHTTPClient(timeout time.Duration, transport http.RoundTripper) *http.Client {
	return &http.Client{Timeout: timeout, Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}
