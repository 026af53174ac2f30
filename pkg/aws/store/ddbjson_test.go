package store_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB JSON: the attribute-value form DynamoDB's own API, its exports
// and `aws dynamodb scan` speak ({"S": "x"}, {"N": "1"}, {"M": {...}}). The
// release fixtures keep items in it, so they read like any DynamoDB dump and
// do not depend on the store's Go types.

func avToJSON(v types.AttributeValue) (any, error) {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": v.Value}, nil
	case *types.AttributeValueMemberN:
		return map[string]any{"N": v.Value}, nil
	case *types.AttributeValueMemberB:
		return map[string]any{"B": base64.StdEncoding.EncodeToString(v.Value)}, nil
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}, nil
	case *types.AttributeValueMemberNULL:
		return map[string]any{"NULL": true}, nil
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": v.Value}, nil
	case *types.AttributeValueMemberNS:
		return map[string]any{"NS": v.Value}, nil
	case *types.AttributeValueMemberBS:
		out := make([]string, len(v.Value))
		for i, b := range v.Value {
			out[i] = base64.StdEncoding.EncodeToString(b)
		}
		return map[string]any{"BS": out}, nil
	case *types.AttributeValueMemberL:
		out := make([]any, len(v.Value))
		for i, e := range v.Value {
			j, err := avToJSON(e)
			if err != nil {
				return nil, err
			}
			out[i] = j
		}
		return map[string]any{"L": out}, nil
	case *types.AttributeValueMemberM:
		m, err := itemToJSON(v.Value)
		if err != nil {
			return nil, err
		}
		return map[string]any{"M": m}, nil
	}
	return nil, fmt.Errorf("attribute value of type %T", v)
}

func itemToJSON(item map[string]types.AttributeValue) (map[string]any, error) {
	out := make(map[string]any, len(item))
	for k, v := range item {
		j, err := avToJSON(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = j
	}
	return out, nil
}

func avFromJSON(raw json.RawMessage) (types.AttributeValue, error) {
	var one map[string]json.RawMessage
	if err := json.Unmarshal(raw, &one); err != nil {
		return nil, err
	}
	if len(one) != 1 {
		return nil, fmt.Errorf("an attribute value has one type, got %d", len(one))
	}
	for typ, body := range one {
		switch typ {
		case "S":
			var s string
			err := json.Unmarshal(body, &s)
			return &types.AttributeValueMemberS{Value: s}, err
		case "N":
			var s string
			err := json.Unmarshal(body, &s)
			return &types.AttributeValueMemberN{Value: s}, err
		case "B":
			var s string
			if err := json.Unmarshal(body, &s); err != nil {
				return nil, err
			}
			b, err := base64.StdEncoding.DecodeString(s)
			return &types.AttributeValueMemberB{Value: b}, err
		case "BOOL":
			var b bool
			err := json.Unmarshal(body, &b)
			return &types.AttributeValueMemberBOOL{Value: b}, err
		case "NULL":
			return &types.AttributeValueMemberNULL{Value: true}, nil
		case "SS", "NS", "BS":
			var ss []string
			if err := json.Unmarshal(body, &ss); err != nil {
				return nil, err
			}
			switch typ {
			case "SS":
				return &types.AttributeValueMemberSS{Value: ss}, nil
			case "NS":
				return &types.AttributeValueMemberNS{Value: ss}, nil
			}
			bs := make([][]byte, len(ss))
			for i, s := range ss {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					return nil, err
				}
				bs[i] = b
			}
			return &types.AttributeValueMemberBS{Value: bs}, nil
		case "L":
			var l []json.RawMessage
			if err := json.Unmarshal(body, &l); err != nil {
				return nil, err
			}
			out := make([]types.AttributeValue, len(l))
			for i, e := range l {
				v, err := avFromJSON(e)
				if err != nil {
					return nil, err
				}
				out[i] = v
			}
			return &types.AttributeValueMemberL{Value: out}, nil
		case "M":
			m, err := itemFromJSON(body)
			return &types.AttributeValueMemberM{Value: m}, err
		default:
			return nil, fmt.Errorf("unknown attribute type %q", typ)
		}
	}
	panic("unreachable")
}

func itemFromJSON(raw json.RawMessage) (map[string]types.AttributeValue, error) {
	var attrs map[string]json.RawMessage
	if err := json.Unmarshal(raw, &attrs); err != nil {
		return nil, err
	}
	out := make(map[string]types.AttributeValue, len(attrs))
	for k, body := range attrs {
		v, err := avFromJSON(body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

func TestDynamoDBJSONRoundTrips(t *testing.T) {
	t.Parallel()
	item := map[string]types.AttributeValue{
		"s":    &types.AttributeValueMemberS{Value: "x"},
		"n":    &types.AttributeValueMemberN{Value: "12.5"},
		"b":    &types.AttributeValueMemberB{Value: []byte{0, 1, 2}},
		"t":    &types.AttributeValueMemberBOOL{Value: true},
		"null": &types.AttributeValueMemberNULL{Value: true},
		"ss":   &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":   &types.AttributeValueMemberNS{Value: []string{"1", "2"}},
		"bs":   &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2}}},
		"l":    &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "e"}}},
		"m":    &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberN{Value: "3"}}},
	}
	j, err := itemToJSON(item)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	back, err := itemFromJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	j2, err := itemToJSON(back)
	if err != nil {
		t.Fatal(err)
	}
	raw2, _ := json.Marshal(j2)
	if string(raw) != string(raw2) {
		t.Fatalf("round trip changed the item:\n%s\n%s", raw, raw2)
	}
	keys := make([]string, 0, len(back))
	for k := range back {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) != len(item) {
		t.Fatalf("round trip kept %v", keys)
	}
	if _, err := itemFromJSON([]byte(`{"x": {"S": "a", "N": "1"}}`)); err == nil {
		t.Fatal("a value with two types was accepted")
	}
	if _, err := itemFromJSON([]byte(`{"x": {"Q": "a"}}`)); err == nil {
		t.Fatal("an unknown type was accepted")
	}
}
