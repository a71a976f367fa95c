package catalog

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// Validator is implemented by payload types with rules beyond field presence
// and JSON kinds. Prepare calls Validate on the decoded payload; a returned
// *envelope.FieldError names the field relative to the payload.
type Validator interface{ Validate() error }

// fitPayload checks that payload fits the declared type of version v and
// returns it in envelope form. Required fields are those whose json tag has
// neither omitempty nor omitzero and whose Go type is not a pointer.
func fitPayload(eventType string, v Version, payload any) (map[string]any, error) {
	want := v.Payload
	if payload != nil {
		st := reflect.TypeOf(payload)
		if st.Kind() == reflect.Pointer {
			st = st.Elem()
		}
		if st.Kind() == reflect.Struct && st != want {
			return nil, &envelope.FieldError{Field: "payload", Reason: fmt.Sprintf("is a %v; %s schema version %d declares %v", st, eventType, v.Schema, want)}
		}
	}
	norm, err := envelope.NormalizePayload(payload)
	if err != nil {
		return nil, err
	}
	if err := fitValue("payload", want, norm); err != nil {
		return nil, err
	}
	p := reflect.New(want)
	probe := envelope.Envelope{Payload: norm}
	if err := probe.DecodePayload(p.Interface()); err != nil {
		return nil, &envelope.FieldError{Field: "payload", Reason: fmt.Sprintf("does not decode into %v: %v", want, err)}
	}
	if val, ok := p.Interface().(Validator); ok {
		if err := val.Validate(); err != nil {
			var fe *envelope.FieldError
			if errors.As(err, &fe) {
				return nil, &envelope.FieldError{Field: "payload." + fe.Field, Reason: fe.Reason}
			}
			return nil, &envelope.FieldError{Field: "payload", Reason: err.Error()}
		}
	}
	return norm, nil
}

var (
	timeType        = reflect.TypeFor[time.Time]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textType        = reflect.TypeFor[encoding.TextUnmarshaler]()
)

type jsonField struct {
	goName   string
	typ      reflect.Type
	required bool
}

// jsonFields lists t's fields by JSON name, flattening embedded structs as
// encoding/json does (simplified: no conflict resolution beyond first wins).
func jsonFields(t reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for n, ef := range jsonFields(et) {
					if _, dup := out[n]; !dup {
						if f.Type.Kind() == reflect.Pointer {
							ef.required = false
						}
						out[n] = ef
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		optional := f.Type.Kind() == reflect.Pointer
		for _, o := range strings.Split(opts, ",") {
			optional = optional || o == "omitempty" || o == "omitzero"
		}
		out[name] = jsonField{goName: f.Name, typ: f.Type, required: !optional}
	}
	return out
}

func fitValue(path string, t reflect.Type, v any) error {
	if t == timeType || reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textType) && t.Kind() != reflect.String {
		return nil // custom decoding: the strict decode that follows decides
	}
	wrong := func(want string) error {
		return &envelope.FieldError{Field: path, Reason: fmt.Sprintf("is %s, want %s (%v)", kind(v), want, t)}
	}
	switch t.Kind() {
	case reflect.Pointer:
		if v == nil {
			return nil
		}
		return fitValue(path, t.Elem(), v)
	case reflect.Interface:
		return nil
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return wrong("an object")
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			f, ok := fields[k]
			if !ok {
				return &envelope.FieldError{Field: path + "." + k, Reason: fmt.Sprintf("is not a field of %v", t)}
			}
			if m[k] == nil {
				if f.required {
					return &envelope.FieldError{Field: path + "." + k, Reason: fmt.Sprintf("is null; %v.%s is required", t, f.goName)}
				}
				continue
			}
			if err := fitValue(path+"."+k, f.typ, m[k]); err != nil {
				return err
			}
		}
		names := make([]string, 0, len(fields))
		for n := range fields {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if _, present := m[n]; !present && fields[n].required {
				return &envelope.FieldError{Field: path + "." + n, Reason: fmt.Sprintf("is missing; %v.%s is required (tag it omitempty, or make it a pointer, to make it optional)", t, fields[n].goName)}
			}
		}
		return nil
	case reflect.String:
		if _, ok := v.(string); !ok {
			return wrong("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return wrong("a boolean")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			return wrong("an integer")
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			return &envelope.FieldError{Field: path, Reason: fmt.Sprintf("is %s, want an integer that fits %v", n, t)}
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			return wrong("a non-negative integer")
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			return &envelope.FieldError{Field: path, Reason: fmt.Sprintf("is %s, want a non-negative integer that fits %v", n, t)}
		}
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			return wrong("a number")
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			if _, ok := v.(string); !ok {
				return wrong("a base64 string")
			}
			return nil
		}
		xs, ok := v.([]any)
		if !ok {
			return wrong("an array")
		}
		for i, x := range xs {
			if x == nil && t.Elem().Kind() != reflect.Pointer && t.Elem().Kind() != reflect.Interface {
				return &envelope.FieldError{Field: fmt.Sprintf("%s[%d]", path, i), Reason: fmt.Sprintf("is null, want %v", t.Elem())}
			}
			if err := fitValue(fmt.Sprintf("%s[%d]", path, i), t.Elem(), x); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return wrong("an object")
		}
		for k, x := range m {
			if x == nil {
				continue
			}
			if err := fitValue(path+"."+k, t.Elem(), x); err != nil {
				return err
			}
		}
	}
	return nil
}

func kind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "the number " + string(x)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
