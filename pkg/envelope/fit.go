package envelope

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
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
//     its Go type is a pointer. A required field is present, and not null
//     unless its Go type is an interface (which holds any value).
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
// required field that is missing or null, or a value of the wrong kind, is a
// *DecodeError naming the field (never a zero value). Values are assigned
// as encoding/json would decode them (an interface field gets float64
// numbers), in one pass over the payload, without a JSON round trip.
func (e *Envelope) DecodePayload(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("decode payload: want a non-nil pointer, got %T", v)
	}
	t := rv.Type().Elem()
	if err := fitValue("payload", t, e.Payload, false, rv.Elem()); err != nil {
		return &DecodeError{Into: t.String(), Err: err}
	}
	return nil
}

// CheckPayload checks that payload, in envelope form (NormalizePayload's),
// fits the struct type t as an emit requires: the rules DecodePayload reads
// by, and no member that t does not have. The *FieldError names the field.
func CheckPayload(payload map[string]any, t reflect.Type) error {
	if err := fitValue("payload", t, payload, true, reflect.Value{}); err != nil {
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
	Index    []int        // the field's index path (through embedded structs)
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
	collectFields(t, nil, m, false)
	out := make([]jsonField, 0, len(m))
	for _, f := range m {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	fieldCache.Store(t, out)
	return out
}

// collectFields adds t's fields to out: its own first, then those of its
// embedded structs, so that a field of t wins over a promoted one of the
// same name, as in encoding/json.
func collectFields(t reflect.Type, index []int, out map[string]jsonField, viaPointer bool) {
	var embedded []reflect.StructField
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
				embedded = append(embedded, f)
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
		out[name] = jsonField{Name: name, GoName: f.Name, Type: f.Type, Required: !optional, Index: append(slices.Clone(index), i)}
	}
	for _, f := range embedded {
		et := f.Type
		if et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		collectFields(et, append(slices.Clone(index), f.Index...), out, viaPointer || f.Type.Kind() == reflect.Pointer)
	}
}

// fitValue checks v against t at path; strict refuses object members that t
// does not have. When dst is valid (a settable value of type t) it also
// assigns v to it, as encoding/json would decode v's JSON.
func fitValue(path string, t reflect.Type, v any, strict bool, dst reflect.Value) *FieldError {
	set := dst.IsValid()
	wrong := func(want string) *FieldError {
		return &FieldError{Field: path, Reason: fmt.Sprintf("is %s, want %s (%v)", kindName(v), want, t)}
	}
	switch pt := reflect.PointerTo(t); {
	case t == timeType:
		s, ok := v.(string)
		if !ok {
			return wrong("an RFC 3339 time string")
		}
		ts, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return &FieldError{Field: path, Reason: fmt.Sprintf("is %q, want an RFC 3339 time (%v)", s, t)}
		}
		if set {
			dst.Set(reflect.ValueOf(ts))
		}
		return nil
	case pt.Implements(unmarshalerType), pt.Implements(textType) && t.Kind() != reflect.String:
		if _, ok := v.(string); !ok && !pt.Implements(unmarshalerType) {
			return wrong("a string") // encoding/json hands UnmarshalText strings only
		}
		if !set {
			dst = reflect.New(t).Elem() // a check decodes too: the type decides
		}
		return viaJSON(path, v, dst)
	}
	switch t.Kind() {
	case reflect.Pointer:
		if v == nil {
			if set {
				dst.SetZero()
			}
			return nil
		}
		if !set {
			return fitValue(path, t.Elem(), v, strict, dst)
		}
		if dst.IsNil() {
			dst.Set(reflect.New(t.Elem()))
		}
		return fitValue(path, t.Elem(), v, strict, dst.Elem())
	case reflect.Interface:
		return viaJSON(path, v, dst) // numbers become float64, as encoding/json makes them
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
			case present && x == nil && f.Required && f.Type.Kind() != reflect.Interface:
				return &FieldError{Field: path + "." + f.Name, Reason: fmt.Sprintf("is null; %v.%s is required", t, f.GoName)}
			case !present:
				continue
			}
			var fd reflect.Value
			if set {
				if fd, ok = fieldByIndex(dst, f.Index); !ok {
					return &FieldError{Field: path + "." + f.Name, Reason: fmt.Sprintf("cannot be set: %v embeds a pointer to an unexported struct", t)}
				}
			}
			if x == nil {
				if set && (f.Type.Kind() == reflect.Pointer || f.Type.Kind() == reflect.Interface || f.Type.Kind() == reflect.Map || f.Type.Kind() == reflect.Slice) {
					fd.SetZero() // encoding/json: null sets these to nil, and leaves the rest
				}
				continue
			}
			if err := fitValue(path+"."+f.Name, f.Type, x, strict, fd); err != nil {
				return err
			}
		}
		return nil
	case reflect.String:
		x, ok := v.(string)
		if !ok {
			return wrong("a string")
		}
		if set {
			dst.SetString(x)
		}
	case reflect.Bool:
		x, ok := v.(bool)
		if !ok {
			return wrong("a boolean")
		}
		if set {
			dst.SetBool(x)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			return wrong("an integer")
		}
		i, err := strconv.ParseInt(string(n), 10, t.Bits())
		if err != nil {
			return &FieldError{Field: path, Reason: fmt.Sprintf("is %s, want an integer that fits %v", n, t)}
		}
		if set {
			dst.SetInt(i)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, ok := v.(json.Number)
		if !ok {
			return wrong("a non-negative integer")
		}
		u, err := strconv.ParseUint(string(n), 10, t.Bits())
		if err != nil {
			return &FieldError{Field: path, Reason: fmt.Sprintf("is %s, want a non-negative integer that fits %v", n, t)}
		}
		if set {
			dst.SetUint(u)
		}
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			return wrong("a number")
		}
		f, err := strconv.ParseFloat(string(n), t.Bits())
		if err != nil {
			return &FieldError{Field: path, Reason: fmt.Sprintf("is %s, want a number that fits %v", n, t)}
		}
		if set {
			dst.SetFloat(f)
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			s, ok := v.(string)
			if !ok {
				return wrong("a base64 string")
			}
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return &FieldError{Field: path, Reason: fmt.Sprintf("is not base64 (%v): %v", t, err)}
			}
			if set {
				dst.SetBytes(b)
			}
			return nil
		}
		xs, ok := v.([]any)
		if !ok {
			return wrong("an array")
		}
		if set {
			if t.Kind() == reflect.Slice {
				dst.Set(reflect.MakeSlice(t, len(xs), len(xs)))
			} else {
				dst.SetZero()
			}
		}
		for i, x := range xs {
			p := path + "[" + strconv.Itoa(i) + "]"
			if x == nil {
				if !nullable(t.Elem()) {
					return &FieldError{Field: p, Reason: fmt.Sprintf("is null, want %v", t.Elem())}
				}
				continue
			}
			var ed reflect.Value
			if set && i < dst.Len() {
				ed = dst.Index(i)
			}
			if err := fitValue(p, t.Elem(), x, strict, ed); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return wrong("an object")
		}
		if set && t.Key().Kind() != reflect.String {
			if err := checkMap(path, t, m, strict); err != nil {
				return err
			}
			return viaJSON(path, v, dst) // integer or text keys: encoding/json converts them
		}
		if set && dst.IsNil() {
			dst.Set(reflect.MakeMapWithSize(t, len(m)))
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
				if set {
					dst.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), reflect.Zero(t.Elem()))
				}
				continue
			}
			var ev reflect.Value
			if set {
				ev = reflect.New(t.Elem()).Elem()
			}
			if err := fitValue(path+"."+k, t.Elem(), x, strict, ev); err != nil {
				return err
			}
			if set {
				dst.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), ev)
			}
		}
	default:
		return &FieldError{Field: path, Reason: fmt.Sprintf("has Go type %v, which JSON cannot carry", t)}
	}
	return nil
}

// checkMap is fitValue's check of a map with keys that are not strings.
func checkMap(path string, t reflect.Type, m map[string]any, strict bool) *FieldError {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] == nil {
			if !nullable(t.Elem()) {
				return &FieldError{Field: path + "." + k, Reason: fmt.Sprintf("is null, want %v", t.Elem())}
			}
			continue
		}
		if err := fitValue(path+"."+k, t.Elem(), m[k], strict, reflect.Value{}); err != nil {
			return err
		}
	}
	return nil
}

// viaJSON assigns v to dst through encoding/json, for the few types that
// decode themselves (or take any value); the error names path.
func viaJSON(path string, v any, dst reflect.Value) *FieldError {
	if !dst.IsValid() {
		return nil
	}
	if err := json.Unmarshal(mustJSON(v), dst.Addr().Interface()); err != nil {
		return &FieldError{Field: path, Reason: err.Error()}
	}
	return nil
}

// fieldByIndex is dst's field at index, allocating the embedded struct
// pointers on the way, as encoding/json does; false when one is nil and
// cannot be set (a pointer to an unexported struct).
func fieldByIndex(dst reflect.Value, index []int) (reflect.Value, bool) {
	for i, x := range index {
		if i > 0 && dst.Kind() == reflect.Pointer {
			if dst.IsNil() {
				if !dst.CanSet() {
					return reflect.Value{}, false
				}
				dst.Set(reflect.New(dst.Type().Elem()))
			}
			dst = dst.Elem()
		}
		dst = dst.Field(x)
	}
	return dst, true
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
