package catalog

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// Personal data. A payload type marks the fields that hold personal data
// with the struct tag `fourlanes:"personal"` and the field that names whose
// data it is (the data subject, e.g. a customer id) with `fourlanes:"subject"`:
//
//	type SignedUpV1 struct {
//		CustomerID string `json:"customer_id" fourlanes:"subject"`
//		Email      string `json:"email" fourlanes:"personal"`
//	}
//
// Emit stores each personal field sealed under the subject's data key (a
// Vault: pkg/erasure), so the log's hash covers the ciphertext; erasing the
// subject deletes the key, and every later read of those fields gives Erased
// while the chain still verifies. Personal and subject fields are top-level
// string fields; a type with a personal field has exactly one subject field,
// which is required and not itself personal.

// TagPersonal is the struct tag key of the personal-data marks.
const TagPersonal = "fourlanes"

// Erased is what a personal field reads as once its subject is erased.
const Erased = "[erased]"

// ErrErased is returned by a Vault that is asked to seal for, or open the
// data of, an erased subject.
var ErrErased = errors.New("the data subject is erased")

// Vault seals and opens personal fields (pkg/erasure implements it over
// DynamoDB and KMS). aad binds a sealed value to where it is stored: the
// tenant, subject, event type and field; Open refuses a value moved
// elsewhere. Open returns ErrErased for an erased subject.
type Vault interface {
	Seal(ctx context.Context, tenant, subject, aad, plaintext string) (string, error)
	Open(ctx context.Context, tenant, subject, aad, sealed string) (string, error)
}

// personalFields are a payload type's personal-data marks.
type personalFields struct {
	subject  string   // JSON name of the subject field
	personal []string // JSON names of the personal fields
}

func (p personalFields) any() bool { return len(p.personal) > 0 }

// personalOf reads t's marks, or says what is wrong with them.
func personalOf(t reflect.Type) (personalFields, error) {
	var p personalFields
	if t == nil || t.Kind() != reflect.Struct {
		return p, nil
	}
	var subjects []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup(TagPersonal)
		if !ok {
			continue
		}
		name := jsonName(f)
		switch tag {
		case "personal", "subject":
		default:
			return p, fmt.Errorf("field %s: tag %s:%q: say \"personal\" (personal data, stored sealed) or \"subject\" (whose data it is)", f.Name, TagPersonal, tag)
		}
		if f.Type.Kind() != reflect.String {
			return p, fmt.Errorf("field %s: a %s field must be a string, not %v", f.Name, tag, f.Type)
		}
		if name == "" {
			return p, fmt.Errorf("field %s: a %s field needs a JSON name (it is not json:\"-\")", f.Name, tag)
		}
		if tag == "subject" {
			if j := f.Tag.Get("json"); strings.Contains(j, "omitempty") || strings.Contains(j, "omitzero") {
				return p, fmt.Errorf("field %s: the subject field is required: drop omitempty/omitzero from its json tag", f.Name)
			}
			subjects = append(subjects, name)
			continue
		}
		p.personal = append(p.personal, name)
	}
	switch {
	case len(p.personal) > 0 && len(subjects) == 0:
		return p, fmt.Errorf("personal fields %s but no subject: mark the field naming whose data it is (a customer id, say) `%s:\"subject\"`", strings.Join(p.personal, ", "), TagPersonal)
	case len(subjects) > 1:
		return p, fmt.Errorf("subject fields %s: a payload has one data subject", strings.Join(subjects, ", "))
	case len(subjects) == 1 && len(p.personal) == 0:
		return p, fmt.Errorf("subject field %s but no personal field: mark the personal fields `%s:\"personal\"`, or drop the subject mark", subjects[0], TagPersonal)
	}
	if len(subjects) == 1 {
		p.subject = subjects[0]
	}
	return p, nil
}

func jsonName(f reflect.StructField) string {
	j := f.Tag.Get("json")
	if j == "-" {
		return ""
	}
	if name, _, _ := strings.Cut(j, ","); name != "" {
		return name
	}
	return f.Name
}

func personalProblems(t EventType) []Problem {
	var ps []Problem
	for _, v := range t.Versions {
		if _, err := personalOf(v.Payload); err != nil {
			ps = append(ps, Problem{Kind: "type", Name: t.Name, Msg: fmt.Sprintf("schema version %d: %v", v.Schema, err)})
		}
	}
	return ps
}

// Personal reports whether any declared version of any type has personal
// fields: the application then needs a Vault (the construct deploys one).
func (c *Catalog) Personal() bool { return len(c.personal) > 0 }

// indexPersonal records the personal-data marks of every declared payload
// type once (New has checked them), so that Emit and every delivery look
// them up instead of walking the struct by reflection each time.
func (c *Catalog) indexPersonal() {
	for _, t := range c.types {
		for _, v := range t.Versions {
			if p, _ := personalOf(v.Payload); p.any() {
				if c.personal == nil {
					c.personal = map[reflect.Type]personalFields{}
				}
				c.personal[v.Payload] = p
			}
		}
	}
}

// UseVault sets the vault that seals personal fields on Emit and opens them
// on Decode. Without one, Emit refuses a type with personal fields (it would
// store them in the clear), and Decode leaves them sealed.
func (c *Catalog) UseVault(v Vault) { c.vault = v }

// Vault returns the catalog's vault (nil without one).
func (c *Catalog) Vault() Vault { return c.vault }

// aad binds a sealed field to its tenant, subject, type and field.
func aad(tenant, subject, eventType, field string) string {
	return strings.Join([]string{tenant, subject, eventType, field}, "\x00")
}

// PrepareFor is Prepare for an event of tenant: it also seals the payload's
// personal fields (eventstore calls it when the catalog has it).
func (c *Catalog) PrepareFor(ctx context.Context, tenant, eventType string, payload any) (int, map[string]any, error) {
	version, norm, err := c.Prepare(eventType, payload)
	if err != nil {
		return 0, nil, err
	}
	v, _ := c.types[eventType].Version(version)
	p, ok := c.personal[v.Payload]
	if !ok {
		return version, norm, nil
	}
	if c.vault == nil {
		return 0, nil, fmt.Errorf("%s has personal fields (%s) and no vault is configured to seal them: deploy the backbone (it creates the subject-keys table and key) or give the store's catalog a vault (Catalog.UseVault)", eventType, strings.Join(p.personal, ", "))
	}
	subject, _ := norm[p.subject].(string)
	if subject == "" {
		return 0, nil, &envelope.FieldError{Field: "payload." + p.subject, Reason: "is the data subject of the personal fields and must not be empty"}
	}
	for _, f := range p.personal {
		s, ok := norm[f].(string)
		if !ok {
			continue // an absent optional field
		}
		sealed, err := c.vault.Seal(ctx, tenant, subject, aad(tenant, subject, eventType, f), s)
		if err != nil {
			if errors.Is(err, ErrErased) {
				return 0, nil, fmt.Errorf("%s payload.%s: subject %q of tenant %s: %w; nothing was written", eventType, f, subject, tenant, err)
			}
			return 0, nil, fmt.Errorf("%s payload.%s: seal: %w", eventType, f, err)
		}
		norm[f] = sealed
	}
	return version, norm, nil
}

// openingHandler is an untyped handler of a catalog with personal fields:
// it gets the event with its personal fields opened (or Erased), as a typed
// handler's decoded payload has them. The envelope it gets is a copy; the
// event's stored bytes (and hash) are not its concern.
func (c *Catalog) openingHandler(h Handler) Handler {
	return func(ctx context.Context, e envelope.Envelope) error {
		t, ok := c.types[e.Type]
		if !ok {
			return h(ctx, e)
		}
		v, ok := t.Version(e.SchemaVersion)
		if !ok {
			return h(ctx, e)
		}
		opened, err := c.open(ctx, e, v)
		if err != nil {
			return err
		}
		return h(ctx, opened)
	}
}

// open replaces e's sealed personal fields with their plaintext, or with
// Erased for an erased subject, in a copy of the payload.
func (c *Catalog) open(ctx context.Context, e envelope.Envelope, v Version) (envelope.Envelope, error) {
	p, ok := c.personal[v.Payload]
	if !ok || c.vault == nil {
		return e, nil
	}
	subject, _ := e.Payload[p.subject].(string)
	tenant := tenancy.TenantOf(e.TenantID)
	var out map[string]any
	for _, f := range p.personal {
		s, ok := e.Payload[f].(string)
		if !ok {
			continue
		}
		plain, err := c.vault.Open(ctx, tenant, subject, aad(tenant, subject, e.Type, f), s)
		switch {
		case errors.Is(err, ErrErased):
			plain = Erased
		case err != nil:
			return e, fmt.Errorf("decode %s v%d: payload.%s: open: %w", e.Type, e.SchemaVersion, f, err)
		}
		if out == nil {
			out = make(map[string]any, len(e.Payload))
			for k, val := range e.Payload {
				out[k] = val
			}
		}
		out[f] = plain
	}
	if out != nil {
		e.Payload = out
	}
	return e, nil
}
