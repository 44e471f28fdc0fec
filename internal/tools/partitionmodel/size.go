package partitionmodel

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Value is one attribute value in DynamoDB's JSON wire form, e.g.
// {"S":"x"}, {"N":"12"}, {"M":{…}}: what the model reads from request and
// answer bodies without the SDK's types.
type Value map[string]json.RawMessage

// Item is an item in DynamoDB's JSON wire form.
type Item map[string]Value

// ItemSize is the size of item in bytes as DynamoDB counts it for capacity
// units: the sum over its attributes of the UTF-8 length of the name and
// the size of the value (AWS, "DynamoDB item sizes and formats").
func ItemSize(item Item) int { return attributesSize(item, valueSize) }

// attributesSize is the sum over item's attributes of the length of the
// name and the size of the value.
func attributesSize[V any](item map[string]V, size func(V) int) int {
	n := 0
	for name, v := range item {
		n += len(name) + size(v)
	}
	return n
}

// valueSize is the size of one value as DynamoDB counts it.
func valueSize(v Value) int {
	for typ, raw := range v {
		switch typ {
		case "S":
			var s string
			_ = json.Unmarshal(raw, &s)
			return len(s)
		case "N":
			var s string
			_ = json.Unmarshal(raw, &s)
			return numberSize(s)
		case "B":
			return binarySize(raw)
		case "BOOL", "NULL":
			return 1
		case "SS":
			return sumOf(raw, func(s string) int { return len(s) })
		case "NS":
			return sumOf(raw, numberSize)
		case "BS":
			return sumOf(raw, binarySize)
		case "L":
			return 3 + sumOf(raw, func(e Value) int { return 1 + valueSize(e) })
		case "M":
			var m Item
			_ = json.Unmarshal(raw, &m)
			return 3 + len(m) + ItemSize(m)
		}
	}
	return 0
}

// sumOf is the sizes of a JSON array's elements, summed.
func sumOf[T any](raw json.RawMessage, size func(T) int) int {
	var es []T
	_ = json.Unmarshal(raw, &es)
	return total(es, size)
}

// total is the sizes of es, summed.
func total[T any](es []T, size func(T) int) int {
	n := 0
	for _, e := range es {
		n += size(e)
	}
	return n
}

// numberSize is a number's size: 1 byte per two significant digits
// (leading and trailing zeros trimmed), plus 1.
func numberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	sig := utf8.RuneCountInString(strings.Trim(strings.Replace(s, ".", "", 1), "0"))
	return (sig+1)/2 + 1
}

func binarySize(raw json.RawMessage) int {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return len(b)
	}
	return len(s) * 3 / 4
}

// WriteUnits is the write capacity a write of an item of size bytes
// consumes: 1 per KB, rounded up, at least 1. An update or a replacement
// is charged on the larger of the item before and after it.
func WriteUnits(size int) float64 { return math.Max(1, math.Ceil(float64(size)/1024)) }

// ReadUnits is the read capacity a read of an item of size bytes
// consumes: 1 per 4 KB, rounded up, at least 1, for a strongly consistent
// read; half that for an eventually consistent one.
func ReadUnits(size int, consistent bool) float64 {
	u := math.Max(1, math.Ceil(float64(size)/4096))
	if !consistent {
		u /= 2
	}
	return u
}

// ItemSizeOf is ItemSize of an item as the SDK holds it.
func ItemSizeOf(item map[string]types.AttributeValue) int { return attributesSize(item, avSize) }

func avSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		return total(v.Value, func(s string) int { return len(s) })
	case *types.AttributeValueMemberNS:
		return total(v.Value, numberSize)
	case *types.AttributeValueMemberBS:
		return total(v.Value, func(b []byte) int { return len(b) })
	case *types.AttributeValueMemberL:
		return 3 + total(v.Value, func(e types.AttributeValue) int { return 1 + avSize(e) })
	case *types.AttributeValueMemberM:
		return 3 + len(v.Value) + ItemSizeOf(v.Value)
	}
	return 0
}
