package eventpattern

import (
	"errors"
	"strings"
	"testing"
)

// ec2Event is the sample event of the EventBridge / event-ruler documentation.
const ec2Event = `{
  "version": "0",
  "id": "ddddd4-aaaa-7777-4444-345dd43cc333",
  "detail-type": "EC2 Instance State-change Notification",
  "source": "aws.ec2",
  "account": "012345679012",
  "time": "2017-10-02T16:24:49Z",
  "region": "us-east-1",
  "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-000000aaaaaa00000"],
  "detail": {
    "c-count": 5,
    "d-count": 3,
    "x-limit": 301.8,
    "source-ip": "10.0.0.33",
    "instance-id": "i-000000aaaaaa00000",
    "state": "running"
  }
}`

// TestDocumentedRules runs the rules the EventBridge user guide and the
// event-ruler README give for their sample event, with the answers they state,
// plus the near misses that prove each operator can say no.
func TestDocumentedRules(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		want    bool
	}{
		// Simple matching: all named fields must match; a field matches if any
		// listed value does; an event array matches on a non-empty intersection.
		{"simple", `{"detail-type":["EC2 Instance State-change Notification"],"resources":["arn:aws:ec2:us-east-1:123456789012:instance/i-000000aaaaaa00000"],"detail":{"state":["initializing","running"]}}`, true},
		{"simple one field wrong", `{"detail-type":["EC2 Instance State-change Notification"],"detail":{"state":["initializing","stopped"]}}`, false},
		{"missing field", `{"detail":{"nope":["x"]}}`, false},
		{"array intersection empty", `{"resources":["arn:other"]}`, false},

		{"prefix", `{"time":[{"prefix":"2017-10-02"}]}`, true},
		{"prefix miss", `{"time":[{"prefix":"2017-10-03"}]}`, false},
		{"prefix ignore case", `{"source":[{"prefix":{"equals-ignore-case":"AWS."}}]}`, true},
		{"prefix on number", `{"detail":{"c-count":[{"prefix":"5"}]}}`, false},
		{"suffix", `{"source":[{"suffix":"ec2"}]}`, true},
		{"suffix miss", `{"source":[{"suffix":"s3"}]}`, false},
		{"suffix ignore case", `{"source":[{"suffix":{"equals-ignore-case":"EC2"}}]}`, true},
		{"equals-ignore-case", `{"source":[{"equals-ignore-case":"AWS.EC2"}]}`, true},
		{"equals-ignore-case miss", `{"source":[{"equals-ignore-case":"aws.ec"}]}`, false},
		{"wildcard", `{"detail-type":[{"wildcard":"EC2*Notification"}]}`, true},
		{"wildcard middle", `{"detail":{"instance-id":[{"wildcard":"i-*aaaa*0"}]}}`, true},
		{"wildcard miss", `{"source":[{"wildcard":"*.s3"}]}`, false},

		{"anything-but string", `{"detail":{"state":[{"anything-but":"initializing"}]}}`, true},
		{"anything-but string excluded", `{"detail":{"state":[{"anything-but":"running"}]}}`, false},
		{"anything-but number", `{"detail":{"x-limit":[{"anything-but":123}]}}`, true},
		{"anything-but number excluded", `{"detail":{"x-limit":[{"anything-but":301.8}]}}`, false},
		{"anything-but list", `{"detail":{"state":[{"anything-but":["stopped","overloaded"]}]}}`, true},
		{"anything-but list excluded", `{"detail":{"state":[{"anything-but":["stopped","running"]}]}}`, false},
		{"anything-but numbers", `{"detail":{"x-limit":[{"anything-but":[100,200,300]}]}}`, true},
		{"anything-but prefix", `{"detail":{"state":[{"anything-but":{"prefix":"init"}}]}}`, true},
		{"anything-but prefix excluded", `{"detail":{"state":[{"anything-but":{"prefix":"run"}}]}}`, false},
		{"anything-but suffix excluded", `{"detail":{"state":[{"anything-but":{"suffix":"ing"}}]}}`, false},
		{"anything-but ignore case excluded", `{"detail":{"state":[{"anything-but":{"equals-ignore-case":"RUNNING"}}]}}`, false},
		{"anything-but wildcard excluded", `{"detail":{"state":[{"anything-but":{"wildcard":"r*g"}}]}}`, false},
		{"anything-but absent field", `{"detail":{"nope":[{"anything-but":"x"}]}}`, false},
		{"anything-but other type is not excluded", `{"detail":{"c-count":[{"anything-but":"5"}]}}`, true},

		{"numeric", `{"detail":{"c-count":[{"numeric":[">",0,"<=",5]}],"d-count":[{"numeric":["<",10]}],"x-limit":[{"numeric":["=",3.018e2]}]}}`, true},
		{"numeric open upper", `{"detail":{"c-count":[{"numeric":[">",0,"<",5]}]}}`, false},
		{"numeric open lower", `{"detail":{"c-count":[{"numeric":[">",5]}]}}`, false},
		{"numeric closed lower", `{"detail":{"c-count":[{"numeric":[">=",5]}]}}`, true},
		{"numeric on string", `{"detail":{"state":[{"numeric":[">",0]}]}}`, false},
		{"exact number is numeric", `{"detail":{"c-count":[5.0]}}`, true},
		{"exact number miss", `{"detail":{"c-count":[6]}}`, false},
		{"exact string is not a number", `{"detail":{"c-count":["5"]}}`, false},

		{"exists true", `{"detail":{"c-count":[{"exists":true}]}}`, true},
		{"exists true absent", `{"detail":{"e-count":[{"exists":true}]}}`, false},
		{"exists false", `{"detail":{"e-count":[{"exists":false}]}}`, true},
		{"exists false present", `{"detail":{"c-count":[{"exists":false}]}}`, false},
		{"exists false under absent parent", `{"nope":{"deeper":[{"exists":false}]}}`, true},

		{"complex", `{"time":[{"prefix":"2017-10-02"}],"detail":{"state":[{"anything-but":"initializing"}],"c-count":[{"numeric":[">",0,"<=",5]}],"d-count":[{"numeric":["<",10]}],"x-limit":[{"anything-but":[100,200,300]}]}}`, true},
		{"alternatives mix operators", `{"detail":{"state":["stopped",{"prefix":"run"}]}}`, true},

		{"$or one branch", `{"source":["aws.ec2"],"$or":[{"detail":{"state":["stopped"]}},{"detail":{"c-count":[5]}}]}`, true},
		{"$or no branch", `{"source":["aws.ec2"],"$or":[{"detail":{"state":["stopped"]}},{"detail":{"c-count":[6]}}]}`, false},
		{"$or nested in object", `{"detail":{"$or":[{"state":["stopped"]},{"d-count":[3]}]}}`, true},
		{"$or and other field fails", `{"source":["aws.s3"],"$or":[{"detail":{"state":["running"]}},{"detail":{"c-count":[5]}}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Compile([]byte(tt.pattern))
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			got, err := p.Match([]byte(ec2Event))
			if err != nil {
				t.Fatalf("Match: %v", err)
			}
			if got != tt.want {
				t.Errorf("match = %v, want %v\npattern %s", got, tt.want, tt.pattern)
			}
		})
	}
}

// TestExistsOnlyOnLeaves is the README's example: a field whose value is an
// object is not a leaf, so exists:false matches it and exists:true does not.
func TestExistsOnlyOnLeaves(t *testing.T) {
	event := `{"detail":{"state":"running","c-count":{"c1":100}}}`
	for pattern, want := range map[string]bool{
		`{"detail":{"c-count":[{"exists":false}]}}`:       true,
		`{"detail":{"c-count":[{"exists":true}]}}`:        false,
		`{"detail":{"c-count":{"c1":[{"exists":true}]}}}`: true,
	} {
		if got := mustMatch(t, pattern, event); got != want {
			t.Errorf("%s: got %v, want %v", pattern, got, want)
		}
	}
}

// TestArrays covers "crushed out" arrays and array consistency.
func TestArrays(t *testing.T) {
	event := `{"employees":[{"firstName":"John","lastName":"Doe"},{"firstName":"Anna","lastName":"Smith"},{"firstName":"Peter","lastName":"Jones"}]}`
	nested := `{"employees":[[{"firstName":"John","lastName":"Doe"},{"firstName":"Anna","lastName":"Smith"}],[{"firstName":"Peter","lastName":"Jones"}]]}`
	tests := []struct {
		name, pattern, event string
		want                 bool
	}{
		{"element field", `{"employees":{"firstName":["Anna"]}}`, event, true},
		{"multi-level arrays", `{"employees":{"firstName":["Peter"]}}`, nested, true},
		{"same element", `{"employees":{"firstName":["Anna"],"lastName":["Smith"]}}`, event, true},
		{"fields from different elements", `{"employees":{"firstName":["Anna"],"lastName":["Jones"]}}`, event, false},
		{"fields from different nested elements", `{"employees":{"firstName":["John"],"lastName":["Jones"]}}`, nested, false},
		{"scalar array", `{"tags":["b"]}`, `{"tags":["a","b"]}`, true},
		{"scalar array anything-but keeps any other", `{"tags":[{"anything-but":"a"}]}`, `{"tags":["a","b"]}`, true},
		{"scalar array anything-but all excluded", `{"tags":[{"anything-but":["a","b"]}]}`, `{"tags":["a","b"]}`, false},
		{"empty array is absent", `{"tags":[{"exists":false}]}`, `{"tags":[]}`, true},
		{"null is a value", `{"x":[null]}`, `{"x":null}`, true},
		{"null exists", `{"x":[{"exists":true}]}`, `{"x":null}`, true},
		{"null is not absent", `{"x":[null]}`, `{}`, false},
		{"empty string", `{"x":[""]}`, `{"x":""}`, true},
		{"booleans", `{"x":[true]}`, `{"x":true}`, true},
		{"boolean is not a string", `{"x":["true"]}`, `{"x":true}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustMatch(t, tt.pattern, tt.event); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPipesDynamoDBRecord filters the shape a Pipe sees from a DynamoDB stream.
func TestPipesDynamoDBRecord(t *testing.T) {
	p := MustCompile(`{"dynamodb":{"NewImage":{"kind":{"S":["event"]}}}}`, ForPipes())
	insertEvent := `{"eventName":"INSERT","dynamodb":{"Keys":{"tenant_id":{"S":"t1"},"seq":{"N":"7"}},"NewImage":{"kind":{"S":"event"},"seq":{"N":"7"}}}}`
	insertHead := `{"eventName":"INSERT","dynamodb":{"Keys":{"tenant_id":{"S":"t1"},"seq":{"N":"0"}},"NewImage":{"kind":{"S":"head"},"seq":{"N":"0"}}}}`
	remove := `{"eventName":"REMOVE","dynamodb":{"Keys":{"tenant_id":{"S":"t1"},"seq":{"N":"7"}},"OldImage":{"kind":{"S":"event"}}}}`
	for event, want := range map[string]bool{insertEvent: true, insertHead: false, remove: false} {
		got, err := p.Match([]byte(event))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("got %v, want %v for %s", got, want, event)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct{ name, pattern, want string }{
		{"not json", `{`, "not JSON"},
		{"not an object", `["x"]`, "must be a JSON object"},
		{"empty object", `{}`, "empty objects"},
		{"leaf not array", `{"a":"x"}`, "must be an object or an array"},
		{"empty array", `{"a":[]}`, "empty arrays"},
		{"nested value", `{"a":[["x"]]}`, "match values"},
		{"unknown operator", `{"a":[{"regex":"x"}]}`, `unknown operator "regex"`},
		{"two keys", `{"a":[{"prefix":"x","suffix":"y"}]}`, "exactly one key"},
		{"prefix not string", `{"a":[{"prefix":5}]}`, "prefix"},
		{"exists not bool", `{"a":[{"exists":"yes"}]}`, "true or false"},
		{"numeric bad op", `{"a":[{"numeric":["!=",5]}]}`, "unknown operator"},
		{"numeric upper first", `{"a":[{"numeric":["<",5,">",1]}]}`, "upper bound must come last"},
		{"numeric inverted", `{"a":[{"numeric":[">",5,"<",1]}]}`, "lower bound"},
		{"numeric string value", `{"a":[{"numeric":[">","5"]}]}`, "numeric"},
		{"anything-but mixed", `{"a":[{"anything-but":["x",1]}]}`, "all strings or all numbers"},
		{"anything-but empty", `{"a":[{"anything-but":[]}]}`, "empty list"},
		{"anything-but null", `{"a":[{"anything-but":null}]}`, "strings or numbers"},
		{"anything-but empty prefix", `{"a":[{"anything-but":{"prefix":""}}]}`, "non-empty"},
		{"wildcard double star", `{"a":[{"wildcard":"a**b"}]}`, "consecutive"},
		{"wildcard bad escape", `{"a":[{"wildcard":"a\\b"}]}`, "backslash"},
		{"$or with operator", `{"$or":[{"prefix":["x"]},{"b":["y"]}]}`, "operator"},
		{"cidr", `{"ip":[{"cidr":"10.0.0.0/8"}]}`, "not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile([]byte(tt.pattern))
			if err == nil {
				t.Fatalf("Compile(%s) = nil error, want one containing %q", tt.pattern, tt.want)
			}
			if !errors.Is(err, ErrInvalidPattern) {
				t.Errorf("error %v does not wrap ErrInvalidPattern", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestForPipes(t *testing.T) {
	for _, op := range []string{`{"prefix":"x"}`, `{"suffix":"x"}`, `{"equals-ignore-case":"x"}`, `{"wildcard":"x*"}`} {
		pattern := `{"a":[{"anything-but":` + op + `}]}`
		if _, err := Compile([]byte(pattern)); err != nil {
			t.Errorf("without ForPipes, %s: %v", pattern, err)
		}
		if _, err := Compile([]byte(pattern), ForPipes()); err == nil || !strings.Contains(err.Error(), "Pipes") {
			t.Errorf("ForPipes accepted %s (err %v)", pattern, err)
		}
	}
	long := `{"a":["` + strings.Repeat("x", MaxPipesPatternBytes) + `"]}`
	if _, err := Compile([]byte(long), ForPipes()); err == nil {
		t.Error("ForPipes accepted a pattern over 4096 bytes")
	}
	if _, err := Compile([]byte(`{"a":[{"anything-but":"x"}]}`), ForPipes()); err != nil {
		t.Errorf("ForPipes refused plain anything-but: %v", err)
	}
}

// TestMatchValueNumberTypes: events decoded elsewhere may hold float64 or ints.
func TestMatchValueNumberTypes(t *testing.T) {
	p := MustCompile(`{"n":[{"numeric":[">",1,"<",3]}],"m":[5]}`)
	if !p.MatchValue(map[string]any{"n": 2.5, "m": 5}) {
		t.Error("float64/int event did not match")
	}
	if p.MatchValue(map[string]any{"n": int64(3), "m": 5}) {
		t.Error("3 matched (1, 3)")
	}
}

func TestMatchBadEvent(t *testing.T) {
	if _, err := MustCompile(`{"a":["x"]}`).Match([]byte(`{"a":`)); err == nil {
		t.Error("Match of truncated JSON returned no error")
	}
	if _, err := MustCompile(`{"a":["x"]}`).Match([]byte(`{} {}`)); err == nil {
		t.Error("Match of two JSON values returned no error")
	}
}

func mustMatch(t *testing.T, pattern, event string) bool {
	t.Helper()
	p, err := Compile([]byte(pattern))
	if err != nil {
		t.Fatalf("Compile(%s): %v", pattern, err)
	}
	got, err := p.Match([]byte(event))
	if err != nil {
		t.Fatalf("Match: %v", err)
	}
	return got
}
