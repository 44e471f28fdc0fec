package dynamostore

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/report"
)

var _ queue.ReportStore = (*Store)(nil)

// A program's report items share its partition REPORT#<programId>: the
// minute tallies (MIN#<Unix minute, 10 digits>) and the kept report
// (REPORT). Each is kept history.Retention past its minute or making.
const (
	reportSK     = "REPORT"
	minutePrefix = "MIN#"
	scanSegments = 4 // EachToken's parallel Scan
)

func reportPK(programID string) string { return "REPORT#" + programID }

// minuteSK is the sort key of the minute holding at.
func minuteSK(at time.Time) string { return fmt.Sprintf("%s%010d", minutePrefix, at.Unix()/60) }

// counter is a minute item's counter attribute and its field of a report.Minute.
type counter struct {
	name string
	v    *int64
}

// counters are m's counters as a minute item names them (s0..s59: PerSecond).
func counters(m *report.Minute) []counter {
	cs := []counter{{"requests", &m.Requests}, {"polls", &m.Polls}, {"proofsSolved", &m.ProofsSolved},
		{"proofsFailed", &m.ProofsFailed}, {"bypass", &m.BypassPasses}, {"answers", &m.Answers},
		{"positions", &m.Positions}, {"estimatesMs", &m.EstimatesMs}, {"counters", &m.Counters}}
	for i := range m.PerSecond {
		cs = append(cs, counter{"s" + strconv.Itoa(i), &m.PerSecond[i]})
	}
	return cs
}

// AddMinute implements report.Sink: one UpdateItem that ADDs m's non-zero
// counters to its minute's item, and flush to the item's flushes, unless
// they hold flush already (an applied attempt or call: nil).
func (s *Store) AddMinute(ctx context.Context, programID, flush string, m report.Minute) error {
	at := m.At.UTC().Truncate(time.Minute)
	flushes := expression.Name("flushes")
	upd := expression.Set(expression.Name("atMs"), expression.Value(at.UnixMilli())).
		Set(expression.Name("programId"), expression.Value(programID)).
		Set(expression.Name("ttl"), expression.Value(ttlSeconds(at.Add(history.Retention)))).
		Add(flushes, expression.Value(&types.AttributeValueMemberSS{Value: []string{flush}}))
	for _, c := range counters(&m) {
		if *c.v != 0 {
			upd = upd.Add(expression.Name(c.name), expression.Value(*c.v))
		}
	}
	_, err := s.updateItem(ctx, itemKey(reportPK(programID), minuteSK(at)), expression.Not(flushes.Contains(flush)), upd, types.ReturnValueNone)
	if _, failed := conditionFailed(err); failed {
		return nil
	}
	return opErr(throttled(err), "add minute %s", programID)
}

// minuteItem decodes a minute item; absent counters are 0.
type minuteItem struct{ report.Minute }

func (m *minuteItem) UnmarshalDynamoDBAttributeValue(av types.AttributeValue) error {
	item, ok := av.(*types.AttributeValueMemberM)
	if !ok {
		return errors.New("a minute item is not a map")
	}
	var at struct {
		AtMs int64 `dynamodbav:"atMs"`
	}
	if err := attributevalue.UnmarshalMap(item.Value, &at); err != nil {
		return err
	}
	m.At = pace.FromUnixMs(at.AtMs)
	for _, c := range counters(&m.Minute) {
		if v, ok := item.Value[c.name]; ok {
			if err := attributevalue.Unmarshal(v, c.v); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
		}
	}
	return nil
}

// Minutes implements queue.ReportStore with a strongly consistent query of
// the program's minute items, ascending.
func (s *Store) Minutes(ctx context.Context, programID string) ([]report.Minute, error) {
	key := expression.Key("pk").Equal(expression.Value(reportPK(programID))).And(expression.Key("sk").BeginsWith(minutePrefix))
	items, err := query[minuteItem](ctx, s, key, true, 0)
	if err != nil {
		return nil, opErr(err, "minutes of %s", programID)
	}
	out := make([]report.Minute, len(items))
	for i, it := range items {
		out[i] = it.Minute
	}
	return out, nil
}

// reportItem is a program's kept report: its JSON, gzipped.
type reportItem struct {
	PK       string `dynamodbav:"pk"`
	SK       string `dynamodbav:"sk"`
	Report   []byte `dynamodbav:"report"`
	MadeAtMs int64  `dynamodbav:"madeAtMs"`
	Final    bool   `dynamodbav:"final"`
	TTL      int64  `dynamodbav:"ttl"`
}

// PutReport implements queue.ReportStore: one unconditional PutItem.
func (s *Store) PutReport(ctx context.Context, r report.Report) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	err := json.NewEncoder(zw).Encode(r)
	if err == nil {
		err = zw.Close()
	}
	var av map[string]types.AttributeValue
	if err == nil {
		av, err = attributevalue.MarshalMap(reportItem{PK: reportPK(r.ProgramID), SK: reportSK, Report: buf.Bytes(),
			MadeAtMs: pace.UnixMs(r.MadeAt), Final: r.Final, TTL: ttlSeconds(r.MadeAt.Add(history.Retention))})
	}
	if err == nil {
		err = throttled(s.putItem(ctx, av, expression.ConditionBuilder{}))
	}
	return opErr(err, "put report %s", r.ProgramID)
}

// GetReport implements queue.ReportStore with a strongly consistent read.
func (s *Store) GetReport(ctx context.Context, programID string) (report.Report, error) {
	item, err := s.getItem(ctx, itemKey(reportPK(programID), reportSK))
	if err == nil && item == nil {
		return report.Report{}, queue.ErrNotFound
	}
	return decoded("get report "+programID, decodeReport, item, err)
}

func decodeReport(item map[string]types.AttributeValue) (report.Report, error) {
	var r report.Report
	it, err := unmarshal[reportItem](item)
	if err != nil {
		return r, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(it.Report))
	if err != nil {
		return r, err
	}
	data, err := io.ReadAll(zr)
	if err == nil {
		err = json.Unmarshal(data, &r)
	}
	return r, err
}

// EachToken implements queue.ReportStore: a parallel, eventually consistent
// Scan of the whole table (scanSegments segments) filtered to the
// program's token items; read sums the items the pages scanned.
func (s *Store) EachToken(ctx context.Context, programID string, each func(queue.Token)) (read int64, err error) {
	filter := expression.Name("programId").Equal(expression.Value(programID)).And(expression.Name("pk").BeginsWith("TOKEN#"))
	expr, err := expression.NewBuilder().WithFilter(filter).Build()
	if err != nil {
		return 0, opErr(err, "tokens of %s", programID)
	}
	var mu sync.Mutex // holds read, and each's calls
	g, gctx := errgroup.WithContext(ctx)
	for seg := range scanSegments {
		g.Go(func() error {
			in := &dynamodb.ScanInput{
				TableName: &s.table, Segment: aws.Int32(int32(seg)), TotalSegments: aws.Int32(scanSegments), ConsistentRead: aws.Bool(false),
				FilterExpression: expr.Filter(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
			}
			for p := dynamodb.NewScanPaginator(s.client, in); p.HasMorePages(); {
				out, err := p.NextPage(gctx)
				if err != nil {
					return throttled(err)
				}
				toks := make([]queue.Token, len(out.Items))
				for i, item := range out.Items {
					if toks[i], err = DecodeToken(item); err != nil {
						return err
					}
				}
				mu.Lock()
				read += int64(out.ScannedCount)
				for _, t := range toks {
					each(t)
				}
				mu.Unlock()
			}
			return nil
		})
	}
	err = g.Wait()
	return read, opErr(err, "tokens of %s", programID)
}
