// Command audit scans a waiting-room table and checks each program's tickets,
// a shuffled opening's seed and places, and a capped program's admissions
// (docs/design.md, "Tools"); "audit -h" says how.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/dynamostore"
)

// defaultLocalTable is cmd/local's table when TABLE_NAME is unset.
const defaultLocalTable = "waiting-room"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usage is audit's help, above its flags.
const usage = `Usage: audit [flags]

Scans a waiting-room table and checks each program's tickets: none duplicated,
all in 1..issued, issued = tokens + gaps. Tokens are counted by what they record:
an admission seen by a poll (admittedAt; ended early if leftAt too), a leave
(leftAt), or neither (waiting, or admitted and not polled since). A token a handoff
moved to another device (movedTo) holds no ticket: the token it names holds the same
one, and the move must be a waiting token's, no account's, named by no other, in no
cycle. An account (an enqueue token's sub) holds one place. With -shuffle-key
and -shuffle-seed (and -program), a shuffled opening's seed is verified
(shuffle.VerifySeed) and every pre-queue place recomputed (shuffle.PlaceOf). For a
program with a cap (maxActiveUsers), it checks from the tokens and the capacity
groups that no more people were active at once than the cap, counts the sessions
ended, left and no-shows against the program's totals, and that tokens and groups
agree.
Environment: %s (a local DynamoDB API, e.g. http://127.0.0.1:8000; without it the
table on AWS is scanned, and billed), %s (required on AWS; default %q with an
endpoint).
Exit status 1 on duplicates, tickets out of range, gaps above -max-gaps (gaps pass
without it), a move or an account that breaks those rules, or a seed or places that
do not verify; with a cap, also when more
people were active at once than the cap, a program total exceeds what the records
show, or tokens and capacity groups disagree; 2 on a usage error or when the table
cannot be read.

`

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitError = 2
)

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	program := fs.String("program", "", "audit only this program id (default: every program in the table)")
	maxList := fs.Int("max", 50, "list at most this many gap runs, duplicated tickets and tokens out of range per program (0: all)")
	maxGaps := fs.Float64("max-gaps", 0, "fail a program whose gaps exceed this fraction of its issued tickets (0.01: 1 %); 0 lets gaps pass")
	shuffleKey := fs.String("shuffle-key", "", "with -program: the shuffle key's public half, as answers publish it (shuffle.publicKey)")
	shuffleSeed := fs.String("shuffle-seed", "", "with -program: the seed the answers revealed after the opening (shuffle.seed)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, usage, config.EnvDynamoEndpoint, config.EnvTableName, defaultLocalTable)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return exitOK
	} else if err != nil {
		return exitError
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "audit: "+format+"\n", args...)
		return exitError
	}
	switch {
	case *maxGaps < 0 || *maxGaps >= 1:
		return fail("-max-gaps %g: want a fraction in [0, 1)", *maxGaps)
	case (*shuffleKey != "" || *shuffleSeed != "") && *program == "":
		return fail("-shuffle-key and -shuffle-seed need -program")
	case fs.NArg() > 0:
		fail("unexpected argument %q", fs.Arg(0))
		fs.Usage()
		return exitError
	}
	endpoint, table := strings.TrimSpace(getenv(config.EnvDynamoEndpoint)), strings.TrimSpace(getenv(config.EnvTableName))
	if table == "" && endpoint == "" {
		return fail("%s is required without %s", config.EnvTableName, config.EnvDynamoEndpoint)
	}
	table = cmp.Or(table, defaultLocalTable)
	client, err := dynamostore.NewClient(ctx, endpoint)
	if err != nil {
		return fail("%v", err)
	}
	items, scanned, err := scan(ctx, client, table)
	if err != nil {
		return fail("%v", err)
	}
	groups := 0
	for _, gs := range items.Groups {
		groups += len(gs)
	}
	fmt.Fprintf(stdout, "table %s: %d items (%d programs, %d tokens, %d claims, %d ticket shards, %d capacity groups, %d handoff codes, %d other)\n",
		table, scanned, len(items.Programs), len(items.Tokens), items.Claims, items.Shards, groups, items.Handoffs, items.Other)
	if p, ok := items.Programs[*program]; ok && (*shuffleKey != "" || *shuffleSeed != "") {
		p.ShufflePublicKey, p.ShuffleSeed = *shuffleKey, *shuffleSeed
		items.Programs[*program] = p
	}
	reports := AuditAll(items, *program)
	switch {
	case len(reports) == 0 && *program != "":
		return fail("no program %q in table %s", *program, table)
	case len(reports) == 0:
		return fail("no programs in table %s", table)
	}
	code := exitOK
	for _, r := range reports {
		r.GapLimit = *maxGaps
		r.Write(stdout, *maxList)
		if !r.OK() {
			code = exitFail
		}
	}
	return code
}

// scan reads every item of table with strongly consistent reads.
func scan(ctx context.Context, client *dynamodb.Client, table string) (Items, int, error) {
	var items Items
	n := 0
	pages := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err == nil {
			err = Decode(page.Items, &items)
		}
		if err != nil {
			return Items{}, 0, fmt.Errorf("scan %s: %w", table, err)
		}
		n += len(page.Items)
	}
	return items, n, nil
}
