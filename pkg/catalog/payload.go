package catalog

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// Validator is implemented by payload types with rules beyond field presence
// and JSON kinds. Prepare calls Validate on the decoded payload; a returned
// *envelope.FieldError names the field relative to the payload.
type Validator interface{ Validate() error }

var validatorType = reflect.TypeFor[Validator]()

// fitPayload checks that payload fits the declared type of version v and
// returns it in envelope form, by envelope.CheckPayload's rules: required
// fields are those whose json tag has neither omitempty nor omitzero and
// whose Go type is not a pointer; no member the type does not have.
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
	if err := envelope.CheckPayload(norm, want); err != nil {
		return nil, err
	}
	if !reflect.PointerTo(want).Implements(validatorType) {
		return norm, nil
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
