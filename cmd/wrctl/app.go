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

// errUsage is a command line already explained as wrong (exit status 2).
var errUsage = errors.New("usage")

// usageError prints msg for command cmd ("" for wrctl's own) and where its help is.
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
  report ID     how the sale went: waits, who gave up where, estimates (-csv, -html FILE)
  delete ID     delete a closed program, its id taken for 7 days (asks to type it again, or -yes)
  token ID TOKEN   where a token stands, as its holder would see it
  token -account SUB ID   the place of the site's account SUB
  revoke ID TOKEN  revoke a token: no place, no admission, no pass
  keys             the keys that sign the passes, newest first
  keys rotate      a new signing key, which signs from 15 minutes on
  keys revoke KID  revoke a signing key (asks to type the kid again, or -yes)
  edge ID MODE     the program at the edge gate: off, standby or on (-paths)
  edge-keys        the edge gate's keys; edge-keys rotate (-drop) makes a new one

Every command takes -url (default $WR_URL, else ` + defaultURL + `), -json,
-timeout, -region and -profile, before the command or after it. A 429 or
BUSY answer is retried after its Retry-After, another 503 too but for admit,
passes, keys rotate and edge-keys rotate.
Authentication: with ADMIN_TOKEN set, the local server's bearer token (only
over https or to a loopback host); otherwise a SigV4 signature with your
AWS credentials (the SDK's default chain: AWS_PROFILE, AWS_ACCESS_KEY_ID,
SSO, …), for the region of the API's host or -region.
Run "wrctl COMMAND -h" for a command's flags.
`

// app is one run of wrctl and its outside world.
type app struct {
	getenv    func(string) string
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
	clock     clockwork.Clock                                  // a fake one in tests
	sleep     func(ctx context.Context, d time.Duration) error // waits before a retry (nil: the real clock)
	terminal  bool
	transport http.RoundTripper // carries the requests (nil: http.DefaultTransport)
}

func newApp(getenv func(string) string, stdout, stderr io.Writer) *app {
	return &app{getenv: getenv, stdin: strings.NewReader(""), stdout: stdout, stderr: stderr, clock: clockwork.NewRealClock(), terminal: isTerminal(stdout)}
}

// command is a subcommand: its positional arguments, its help, and what runs it.
type command struct {
	args     string // names of the positional arguments
	synopsis string
	sampling bool                          // sends each request once: the next sample is the retry (watch)
	valid    func(args []string) error     // checks the arguments before anything is sent (nil: any)
	run      runner                        // a command without flags of its own
	flags    func(fs *flag.FlagSet) runner // registers a command's flags, and returns what runs it
}

// runner runs a command.
type runner = func(ctx context.Context, c *call) error

// call is what a command runs with.
type call struct {
	globals
	client *client.Client
	args   []string
}

func (a *app) commands() map[string]command {
	toggle := func(set api.ProgramSettings, synopsis string) command {
		return command{args: "ID", synopsis: synopsis, run: func(ctx context.Context, c *call) error { return a.put(ctx, c, set) }}
	}
	return map[string]command{
		"get":   {args: "ID", synopsis: "Prints the program's counters and settings.", run: a.get},
		"put":   {args: "ID", synopsis: "Creates the program, or changes the settings given as flags (and only those).", flags: a.putCommand},
		"admit": {args: "ID N", synopsis: "Admits N more of the people waiting now, on top of the admission rate.", valid: validAdmit, run: a.admit},
		"passes": {args: "ID", synopsis: "Issues bypass passes: each lets one person into the program's site without queueing,\nuntil it expires; under maxActiveUsers each holds a slot until then. Prints one per line.",
			flags: a.passesCommand},
		"pause":  toggle(api.ProgramSettings{Paused: new(true)}, "Stops admission; people keep their place."),
		"resume": toggle(api.ProgramSettings{Paused: new(false)}, "Restarts admission at the program's rate."),
		"close":  toggle(api.ProgramSettings{Closed: new(true)}, "Stops new entries; people already waiting keep their place."),
		"reopen": toggle(api.ProgramSettings{Closed: new(false)}, "Takes new entries again."),
		"token": {args: "ID [TOKEN]", synopsis: "Prints where the token stands, as its holder would see it (never the pass), and its times;\nwith -account, the place of a site's account (its enqueue tokens' sub) and the account.",
			flags: a.tokenCommand},
		"revoke": {args: "ID TOKEN", synopsis: "Revokes the token: it reads REVOKED, with no place, admission or pass.\nA pass already handed out stays valid offline until it expires.",
			run: a.revoke},
		"watch": {args: "ID", sampling: true, synopsis: "Shows the crowd live: issued, admitted, waiting, the rate, when the last person in line gets in,\nenters/s and admissions/s, and the queue length over time. Redraws in place on a terminal;\nprints one line per sample otherwise (one JSON object per line with -json).",
			flags: a.watchCommand},
		"list":    {synopsis: "Prints every program: waiting, admitted, issued, rate and state.", flags: a.listCommand},
		"history": {args: "ID", synopsis: "Prints the program's admin changes, newest first: when, when in effect, who, what.", flags: a.historyCommand},
		"report": {args: "ID", synopsis: "Prints the program's report: people by what became of them, the waits of the admitted, who gave up\nwhere (by position and by the estimate shown), how the estimates held, requests, admin changes.\nFinal once the program closed and settled. -csv prints the per-minute series; -html FILE writes\nthe report with its charts as one page that opens offline and prints on A4.",
			flags: a.reportCommand},
		"delete": {args: "ID", synopsis: "Deletes a closed program: it is gone everywhere, and its id stays taken for 7 days, on the\nlocal server too (a put of it answers PROGRAM_DELETED). Asks you to type the id again, unless -yes\nis given.",
			flags: a.deleteCommand},
		"keys": {synopsis: "Prints the keys that sign the admission passes, newest first: their kid, state (next, signing,\npublished, retired, revoked, unusable), when each signs from, was made and was revoked.\nSubcommands: \"wrctl keys rotate\", \"wrctl keys revoke KID\".",
			run: a.keys},
		"keys rotate": {synopsis: "Makes a new signing key: in the JWKS within a minute, it signs from 15 minutes on (once sites\ncan have it) until the next scheduled key; until it signs, a rotation answers it again and makes none.\nNot repeated after a 503: run \"wrctl keys\" to see whether it was made.",
			run: a.rotateKey},
		"keys revoke": {args: "KID", synopsis: "Revokes a signing key (a leaked one): it leaves the JWKS and signs no more on every instance within\na minute, and sites refuse its passes once their cached JWKS expires (within about 6 minutes);\nwhen it was the key that signs, a new key signs in its place. Asks you to type the kid again,\nunless -yes is given.",
			flags: a.revokeKeyCommand},
		"edge": {args: "ID MODE", synopsis: "Switches the program at the edge gate: off (it lets everyone through), standby (it gives everyone\nan edge session, so that those on the site stay when it turns on) or on (it sends those without one\nto the waiting room). -paths sets the site's paths it guards. Recorded in the history.",
			flags: a.edgeCommand},
		"edge-keys": {synopsis: "Prints the edge gate's keys, newest first: their id, state (next, signing, verifying) and when each\nsigns from. Subcommand: \"wrctl edge-keys rotate\".", run: a.edgeKeys},
		"edge-keys rotate": {synopsis: "Makes a new edge key, which signs once it has reached the edges (2 minutes); the one that signed\nkeeps verifying, the one before it is dropped with the sessions it made (rotate at most once per\nedgeSessionSeconds). With -drop the new key signs at once and every other is dropped: every edge\nsession ends (a leaked key).",
			flags: a.rotateEdgeCommand},
		"check": {args: "ID", synopsis: "Reads the program and says, line by line (OK, WARN, FAIL, and what to do), what may go wrong\nat the announced load, following the pre-sale checklist of docs/operations.md. Exits with\nstatus 1 when any check FAILs.",
			flags: a.checkCommand},
	}
}

// globals are the flags every command takes, before the command or after.
type globals struct {
	url, region, profile string
	json                 bool
	timeout              time.Duration
}

// flagSet is command name's flag set with g's flags, defaulting to g; it prints nothing.
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

// run parses args and runs the command they name.
func (a *app) run(ctx context.Context, args []string) error {
	c, cmds := &call{globals: globals{url: cmp.Or(a.getenv("WR_URL"), defaultURL), timeout: 30 * time.Second}}, a.commands()
	name, args, err := a.commandOf(cmds, &c.globals, args)
	if err != nil {
		return err
	}
	cmd, fs := cmds[name], c.flagSet("wrctl "+name)
	run := cmd.run
	if cmd.flags != nil {
		run = cmd.flags(fs)
	}
	c.args, err = parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(a.stderr)
		fmt.Fprintf(a.stderr, "Usage: wrctl %s [flags] %s\n\n%s\n\nFlags:\n", name, cmd.args, cmd.synopsis)
		fs.PrintDefaults()
		return err
	} else if err != nil {
		return a.usageError(name, err.Error())
	}
	names := strings.Fields(cmd.args)
	optional := len(slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !strings.HasPrefix(n, "[") }))
	if n := len(c.args); n < len(names)-optional || n > len(names) {
		return a.usageError(name, fmt.Sprintf("want %s, got %d argument(s)", cmp.Or(cmd.args, "no arguments"), len(c.args)))
	}
	if cmd.valid != nil {
		if err := cmd.valid(c.args); err != nil {
			return a.usageError(name, err.Error())
		}
	}
	auth, err := a.authorizer(ctx, c.url, c.region, c.profile)
	if err != nil {
		return err
	}
	_, bearer := auth.(client.BearerToken)
	// No redirect is followed: it would carry the credentials elsewhere.
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	hc := &http.Client{Timeout: c.timeout, Transport: a.transport, CheckRedirect: noRedirect}
	opts := []client.Option{client.WithAuth(auth), client.WithHTTPClient(hc)}
	if !cmd.sampling { // a request the server could not serve now is retried
		retry := client.Retry{Attempts: 4, MaxWait: 10 * time.Second, Sleep: a.sleep}
		retry.Notify = func(e *client.Error, wait time.Duration, attempt int) {
			fmt.Fprintf(a.stderr, "wrctl: %v; retrying in %v (%d of %d)\n", e, wait, attempt, retry.Attempts-1)
		}
		opts = append(opts, client.WithRetry(retry))
	}
	if c.client, err = client.New(c.url, opts...); err != nil {
		return hint(err, c.url, bearer)
	}
	return hint(run(ctx, c), c.url, bearer)
}

// commandOf parses the flags before the command into g, and returns the command (keys rotate is one) and its arguments.
func (a *app) commandOf(cmds map[string]command, g *globals, args []string) (string, []string, error) {
	pre := g.flagSet("wrctl")
	err := pre.Parse(args)
	switch args = pre.Args(); {
	case errors.Is(err, flag.ErrHelp) || err == nil && len(args) > 0 && args[0] == "help":
		fmt.Fprint(a.stdout, usage)
		return "", nil, flag.ErrHelp
	case err != nil:
		return "", nil, a.usageError("", err.Error())
	case len(args) == 0:
		fmt.Fprint(a.stderr, usage)
		return "", nil, errUsage
	}
	name := args[0]
	if len(args) > 1 {
		if _, ok := cmds[name+" "+args[1]]; ok {
			name, args = name+" "+args[1], args[1:]
		}
	}
	if _, ok := cmds[name]; !ok {
		names := slices.DeleteFunc(slices.Sorted(maps.Keys(cmds)), func(n string) bool { return strings.Contains(n, " ") })
		return "", nil, a.usageError("", fmt.Sprintf("unknown command %q (commands: %s)", name, strings.Join(names, ", ")))
	}
	return name, args[1:], nil
}

// parseInterspersed parses flags around the positional arguments (wrctl put gala -rate 5), which it
// returns; a token id or kid that starts with '-' (base64url, one in 64) is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		for len(args) > 0 && isDashedID(fs, args[0]) {
			positional, args = append(positional, args[0]), args[1:]
		}
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if args = fs.Args(); len(args) == 0 {
			return positional, nil
		}
		positional, args = append(positional, args[0]), args[1:]
	}
}

// isDashedID reports whether arg is a token id or kid (22 or 43 base64url characters) that starts with '-' and names no flag of fs.
func isDashedID(fs *flag.FlagSet, arg string) bool {
	return strings.HasPrefix(arg, "-") && (len(arg) == 22 || len(arg) == 43) && fs.Lookup(strings.TrimLeft(arg, "-")) == nil &&
		strings.Trim(arg, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == ""
}

// authorizer is ADMIN_TOKEN's bearer token, else SigV4 with the SDK's default chain.
func (a *app) authorizer(ctx context.Context, apiURL, region, profile string) (client.Authorizer, error) {
	if tok := a.getenv("ADMIN_TOKEN"); tok != "" {
		return client.BearerToken(tok), nil
	}
	if region == "" {
		if u, err := url.Parse(apiURL); err == nil {
			region, _ = client.RegionFromHost(u.Host)
		}
	}
	// An empty region or profile is the SDK's default.
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithLogger(logging.Nop{}),
		awsconfig.WithRegion(region), awsconfig.WithSharedConfigProfile(profile))
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("no AWS region to sign for: the API's host %s names none; give -region or set AWS_REGION (or set ADMIN_TOKEN for the local server)", apiURL)
	}
	return client.SigV4{Credentials: cfg.Credentials, Region: cfg.Region}, nil
}

var unknownField = regexp.MustCompile(`^Unknown field "([^"]+)"`)

// hint adds to err what to do about it, when wrctl knows; bearer: the request carried ADMIN_TOKEN.
func hint(err error, apiURL string, bearer bool) error {
	e := &client.Error{} // stays empty unless err is the API's
	errors.As(err, &e)
	field := unknownField.FindStringSubmatch(e.Message)
	u, perr := url.Parse(apiURL)
	loopback := perr == nil && client.Loopback(u.Host)
	var advice string
	switch {
	case !strings.Contains(apiURL, "://"):
		host, _, _ := strings.Cut(apiURL, "/")
		advice = "a URL starts with its scheme: -url " + either(client.Loopback(host), "http://", "https://") + apiURL
	case bearer && perr == nil && u.Scheme == "http" && u.Host != "" && !loopback:
		advice = "ADMIN_TOKEN is set: give an https -url, or unset it to sign with AWS credentials"
	case errors.Is(err, syscall.ECONNREFUSED) && loopback:
		start := "make run"
		port := cmp.Or(u.Port(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
		if addr := net.JoinHostPort(u.Hostname(), port); addr != strings.TrimPrefix(defaultURL, "http://") {
			start += " ADDR=" + addr
		}
		advice = fmt.Sprintf("no server at %s: start the local one with %s at the repository's root, or give -url or WR_URL", apiURL, start)
	case e.Code == api.CodeInvalidJSON && field != nil && flagOf(field[1]) != "":
		advice = "this server does not know -" + flagOf(field[1]) + " yet: it runs an older version than wrctl"
	case (e.Status == http.StatusUnauthorized || e.Code == api.CodeForbidden) && !bearer:
		advice = "the local server takes a bearer token: set ADMIN_TOKEN to the one it printed"
	case e.Status == http.StatusForbidden && e.Code == "" && bearer:
		advice = "an API on AWS takes requests signed with AWS credentials: unset ADMIN_TOKEN"
	case e.Code == api.CodeNoKeyring:
		advice = "a fixed key is rotated as docs/admission-pass.md says, \"Rotating the key\""
	case e.Status == http.StatusForbidden && e.Code == "" && !bearer:
		advice = "check that your AWS identity may execute-api:Invoke the admin routes, and the -region"
	default:
		return err
	}
	return fmt.Errorf("%w\n(%s)", err, advice)
}
