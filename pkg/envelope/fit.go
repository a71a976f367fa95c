package envelope

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// How a payload fits a Go type, the one rule that emitting (CheckPayload),
// reading (DecodePayload) and the catalog gate's JSON Schemas share:
//
//   - A struct is a JSON object whose members are its fields by their json
//     names (embedded structs flattened, as encoding/json does).
//   - A field is required unless its json tag says omitempty or omitzero or
//     its Go type is a pointer. A required field is present and not null.
//   - Every value has the JSON kind its Go type takes: string, boolean,
//     integer (in the Go type's range), number, array, object; []byte is a
//     base64 string. Elements of slices and values of maps are null only when
//     their Go type is a pointer or an interface.
//   - time.Time is an RFC 3339 string. A type with its own UnmarshalText
//     takes a string and decides the rest; one with its own UnmarshalJSON
//     decides for itself.
//
// An emit refuses members the type does not have (a producer's typo is a bug);
// a reader ignores them (a newer producer may have added an optional field).

// DecodeError reports that a payload does not fit the Go type a reader
// decodes it into: a required field is missing or null, or a value has the
// wrong JSON kind. Err names the field, relative to the envelope (e.g.
// payload.items[2].qty). Retrying cannot fix it: Permanent reports true, so a
// DURABLE subscription is dead-lettered at once, with this message.
type DecodeError struct {
	Into string      // the Go type decoded into, e.g. orders.PlacedV2
	Err  *FieldError // the field at fault
}

func (e *DecodeError) Error() string { return "decode payload into " + e.Into + ": " + e.Err.Error() }

// Unwrap returns the *FieldError (which matches ErrInvalid).
func (e *DecodeError) Unwrap() error { return e.Err }

// Permanent reports true: the same payload never decodes on a retry.
func (e *DecodeError) Permanent() bool { return true }

// DecodePayload decodes the payload into v, a pointer to the payload's Go
// type, as a tolerant reader: members v's type does not have are ignored; a
// required field that is missing or null, or a value of the wrong JSON kind,
// is a *DecodeError naming the field (never a zero value).
func (e *Envelope) DecodePayload(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("decode payload: want a non-nil pointer, got %T", v)
	}
	t := rv.Type().Elem()
	if err := fitValue("payload", t, e.Payload, false); err != nil {
		return &DecodeError{Into: t.String(), Err: err}
	}
	if err := json.Unmarshal(mustJSON(e.Payload), v); err != nil {
		// Only a type's own UnmarshalJSON or UnmarshalText gets here.
		return &DecodeError{Into: t.String(), Err: &FieldError{Field: "payload", Reason: err.Error()}}
	}
	return nil
}

// CheckPayload checks that payload, in envelope form (NormalizePayload's),
// fits the struct type t as an emit requires: the rules DecodePayload reads
// by, and no member that t does not have. The *FieldError names the field.
func CheckPayload(payload map[string]any, t reflect.Type) error {
	if err := fitValue("payload", t, payload, true); err != nil {
		return err
	}
	return nil
}

var (
	timeType        = reflect.TypeFor[time.Time]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textType        = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// jsonField is one member of a struct's JSON object.
type jsonField struct {
	Name     string       // the JSON member name
	GoName   string       // the Go field's name
	Type     reflect.Type // the Go field's type
	Required bool         // see the rule above
}

var fieldCache sync.Map // reflect.Type → []jsonField

// jsonFields lists the members of struct type t's JSON object, sorted by
// name: embedded structs flattened as encoding/json does (simplified: the
// first of two fields with one name wins), required as the rule above says.
func jsonFields(t reflect.Type) []jsonField {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]jsonField)
	}
	m := map[string]jsonField{}
	collectFields(t, m, false)
	out := make([]jsonField, 0, len(m))
	for _, f := range m {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	fieldCache.Store(t, out)
	return out
}

func collectFields(t reflect.Type, out map[string]jsonField, viaPointer bool) {
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
				sub := map[string]jsonField{}
				collectFields(et, sub, viaPointer || f.Type.Kind() == reflect.Pointer)
				for n, ef := range sub {
					if _, dup := out[n]; !dup {
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
		if _, dup := out[name]; dup {
			continue
		}
		optional := viaPointer || f.Type.Kind() == reflect.Pointer
		for _, o := range strings.Split(opts, ",") {
			optional = optional || o == "omitempty" || o == "omitzero"
		}
		out[name] = jsonField{Name: name, GoName: f.Name, Type: f.Type, Required: !optional}
	}
}

// fitValue checks v against t at path; strict refuses object members that t
// does not have.
func fitValue(path string, t reflect.Type, v any, strict bool) *FieldError {
	wrong := func(want string) *FieldError {
		return &FieldError{Field: path, Reason: fmt.Sprintf("is %s, want %s (%v)", kindName(v), want, t)}
	}
	switch pt := reflect.PointerTo(t); {
	case t == timeType:
		s, ok := v.(string)
		if !ok {
			return wrong("an RFC 3339 time string")
		}
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			return &FieldError{Field: path, Reason: fmt.Sprintf("is %q, want an RFC 3339 time (%v)", s, t)}
		}
		return nil
	case pt.Implements(unmarshalerType):
		return nil // custom decoding: the decode that follows decides
	case pt.Implements(textType) && t.Kind() != reflect.String:
		if _, ok := v.(string); !ok {
			return wrong("a string") // encoding/json hands UnmarshalText strings only
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		if v == nil {
			return nil
		}
		return fitValue(path, t.Elem(), v, strict)
	case reflect.Interface:
		return nil
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return wrong("an object")
		}
		fields := jsonFields(t)
		if strict {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if !hasField(fields, k) {
					return &FieldError{Field: path + "." + k, Reason: fmt.Sprintf("is not a field of %v", t)}
				}
			}
		}
		for _, f := range fields {
			x, present := m[f.Name]
			switch {
			case !present && f.Required:
				if strict {
					return &FieldError{Field: path + "." + f.Name, Reason: fmt.Sprintf("is missing; %v.%s is required (tag it omitempty, or make it a pointer, to make it optional)", t, f.GoName)}
				}
				return &FieldError{Field: path + "." + f.Name, Reason: fmt.Sprintf("is missing; %v.%s is required", t, f.GoName)}
			case present && x == nil && f.Required:
				return &FieldError{Field: path + "." + f.Name, Reason: fmt.Sprintf("is null; %v.%s is required", t, f.GoName)}
			case present && x != nil:
				if err := fitValue(path+"."+f.Name, f.Type, x, strict); err != nil {
					return err
				}
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
			return &FieldError{Field: path, Reason: fmt.Sprintf("is %s, want an integer that fits %v", n, t)}
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, ok := v.(json.Number)
		if !ok {
			return wrong("a non-negative integer")
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			return &FieldError{Field: path, Reason: fmt.Sprintf("is %s, want a non-negative integer that fits %v", n, t)}
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
			p := path + "[" + strconv.Itoa(i) + "]"
			if x == nil {
				if !nullable(t.Elem()) {
					return &FieldError{Field: p, Reason: fmt.Sprintf("is null, want %v", t.Elem())}
				}
				continue
			}
			if err := fitValue(p, t.Elem(), x, strict); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return wrong("an object")
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			x := m[k]
			if x == nil {
				if !nullable(t.Elem()) {
					return &FieldError{Field: path + "." + k, Reason: fmt.Sprintf("is null, want %v", t.Elem())}
				}
				continue
			}
			if err := fitValue(path+"."+k, t.Elem(), x, strict); err != nil {
				return err
			}
		}
	default:
		return &FieldError{Field: path, Reason: fmt.Sprintf("has Go type %v, which JSON cannot carry", t)}
	}
	return nil
}

func nullable(t reflect.Type) bool {
	return t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface
}

func hasField(fs []jsonField, name string) bool {
	i := sort.Search(len(fs), func(i int) bool { return fs[i].Name >= name })
	return i < len(fs) && fs[i].Name == name
}

func kindName(v any) string {
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
