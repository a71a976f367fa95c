package delivery

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// DynamoDB is the part of the DynamoDB API DynamoStore uses.
type DynamoDB interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// DynamoStore keeps claims and dead letters in the state table (layout in
// pkg/keys: one claim item per event, claims#<event_id> / claims, with an
// entry per subscription, and dead#<tenant> / <event_id>:<subscription>);
// it reads the per-pair claims of the earlier layout,
// claim#<event_id>:<subscription> / claim, and never writes them.
type DynamoStore struct {
	db    DynamoDB
	table string
	log   string // the events table, when WithLog set it
	// perPairGone: WithoutPerPairClaims set it; claims read no per-pair key.
	perPairGone bool
	by          string // ResolvedBy
}

var _ Store = (*DynamoStore)(nil)

// NewDynamoStore returns a Store on the state table named table.
func NewDynamoStore(db DynamoDB, table string) *DynamoStore {
	return &DynamoStore{db: db, table: table}
}

type av = types.AttributeValue

func s(v string) av     { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) av      { return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)} }
func ms(t time.Time) av { return n(t.UnixMilli()) }
func ts(t time.Time) av { return s(t.UTC().Format(time.RFC3339Nano)) }

func eventClaimKey(eventID string) map[string]av {
	return map[string]av{keys.AttrPK: s(keys.StateEventClaimPrefix + eventID), keys.AttrSK: s(keys.StateEventClaimSK)}
}

// legacyClaimKey is the per-pair claim of the earlier layout: read, never
// written (except deleted once a replay moves a dead one into the event's
// claim item).
func legacyClaimKey(k Key) map[string]av {
	return map[string]av{keys.AttrPK: s(keys.StateClaimPrefix + k.String()), keys.AttrSK: s(keys.StateClaimSK)}
}

func deadKey(tenant string, k Key) map[string]av {
	return map[string]av{keys.AttrPK: s(keys.StateDeadPrefix + tenant), keys.AttrSK: s(k.String())}
}

// maxClaimsPerWrite bounds the subscriptions one claim write takes, so that
// its expressions stay well inside DynamoDB's 4 KB per expression; an event
// with more DURABLE subscriptions costs one claim write per 25.
const maxClaimsPerWrite = 25

// maxClaimTries bounds the claim writes of one chunk: each refused one
// returns the item as it is now (ALL_OLD), so a retry only follows another
// delivery's write.
const maxClaimTries = 8

// exprs builds expressions with placeholders for every name and value, and
// no placeholder it does not use (DynamoDB refuses unused ones).
type exprs struct {
	names  map[string]string // placeholder → attribute name
	byName map[string]string // attribute name → placeholder
	values map[string]av
	byKey  map[string]string
}

func newExprs() *exprs {
	return &exprs{names: map[string]string{}, byName: map[string]string{}, values: map[string]av{}, byKey: map[string]string{}}
}

func (x *exprs) name(attr string) string {
	if p, ok := x.byName[attr]; ok {
		return p
	}
	p := "#n" + strconv.Itoa(len(x.names))
	x.names[p], x.byName[attr] = attr, p
	return p
}

// path is the placeholder path of attribute attr of subscription sub's entry.
func (x *exprs) path(sub, attr string) string {
	return x.name(keys.AttrSubClaimPrefix+sub) + "." + x.name(attr)
}

// value returns a placeholder for v; values with the same non-empty key
// share one.
func (x *exprs) value(key string, v av) string {
	if key != "" {
		if p, ok := x.byKey[key]; ok {
			return p
		}
	}
	p := ":v" + strconv.Itoa(len(x.values))
	x.values[p] = v
	if key != "" {
		x.byKey[key] = p
	}
	return p
}

func (x *exprs) str(v string) string { return x.value("s:"+v, s(v)) }

// entry is one subscription's claim in an event claim item.
type entry struct {
	ClaimRecord
	token string
}

// eventItem is an event claim item as read.
type eventItem struct {
	entries map[string]entry // by subscription
	dead    bool             // some entry is dead (AttrDeadSubs): the item carries no TTL
}

func decodeEventItem(eventID string, it map[string]av) eventItem {
	ei := eventItem{entries: map[string]entry{}}
	if it == nil {
		return ei
	}
	tenant := str(it, keys.AttrTenant)
	var expires time.Time
	if exp := num(it, keys.AttrExpiresAt); exp > 0 {
		expires = time.Unix(exp, 0)
	}
	_, ei.dead = it[keys.AttrDeadSubs]
	for name, v := range it {
		sub, ok := strings.CutPrefix(name, keys.AttrSubClaimPrefix)
		m, isMap := v.(*types.AttributeValueMemberM)
		if !ok || !isMap {
			continue
		}
		e := entry{ClaimRecord: ClaimRecord{Key: Key{EventID: eventID, Subscription: sub}, Tenant: tenant,
			Status: Status(str(m.Value, keys.ClaimFieldStatus)), Attempts: int(num(m.Value, keys.ClaimFieldAttempts)), Error: str(m.Value, keys.ClaimFieldError)},
			token: str(m.Value, keys.ClaimFieldToken)}
		if lu := num(m.Value, keys.ClaimFieldLeaseUntil); lu > 0 {
			e.LeaseUntil = time.UnixMilli(lu)
		}
		if !ei.dead {
			e.ExpiresAt = expires
		}
		ei.entries[sub] = e
	}
	return ei
}

// claimView is what a claim knows of an event's claims: its claim item and
// the legacy per-pair claims of the subscriptions asked for.
type claimView struct {
	eventItem
	legacy map[string]ClaimRecord
}

// effective is sub's claim: the event item's entry, else the legacy claim
// (Legacy set), else absent (zero Status).
func (v *claimView) effective(sub string) entry {
	if e, ok := v.entries[sub]; ok {
		return e
	}
	if r, ok := v.legacy[sub]; ok {
		return entry{ClaimRecord: r}
	}
	return entry{}
}

// view is what req.Seen holds when it covers every subscription, else a
// strongly consistent read of the event's claim item and legacy claims.
func (d *DynamoStore) view(ctx context.Context, req EventClaimRequest) (*claimView, error) {
	v := &claimView{eventItem: eventItem{entries: map[string]entry{}}, legacy: map[string]ClaimRecord{}}
	seen := true
	for _, sub := range req.Subscriptions {
		if _, ok := req.Seen[sub]; !ok {
			seen = false
			break
		}
	}
	if seen {
		for sub, r := range req.Seen {
			switch {
			case !r.Found():
			case r.Legacy:
				v.legacy[sub] = r
			default:
				v.entries[sub] = entry{ClaimRecord: r}
				v.dead = v.dead || r.Status == StatusDead
			}
		}
		return v, nil
	}
	ks := []map[string]av{eventClaimKey(req.EventID)}
	for _, sub := range req.Subscriptions {
		if !d.perPairGone {
			ks = append(ks, legacyClaimKey(Key{EventID: req.EventID, Subscription: sub}))
		}
	}
	items, err := d.readItems(ctx, ks)
	if err != nil {
		return nil, err
	}
	v.eventItem = decodeEventItem(req.EventID, items[keys.StateEventClaimPrefix+req.EventID])
	for _, sub := range req.Subscriptions {
		k := Key{EventID: req.EventID, Subscription: sub}
		if it := items[keys.StateClaimPrefix+k.String()]; it != nil {
			r := decodeClaim(it)
			r.Key, r.Legacy = k, true
			v.legacy[sub] = r
		}
	}
	return v, nil
}

// readItems reads state-table items by key, strongly consistent: in
// BatchGetItem requests when the client has it, else (and for keys left
// unprocessed) one GetItem each. The answer is by partition key.
func (d *DynamoStore) readItems(ctx context.Context, ks []map[string]av) (map[string]map[string]av, error) {
	items := map[string]map[string]av{}
	keep := func(_ string, it map[string]av) {
		if pk := str(it, keys.AttrPK); pk != "" {
			items[pk] = it
		}
	}
	if bg, ok := d.db.(batchGetter); ok {
		var left []map[string]av
		for len(ks) > 0 {
			n := min(len(ks), maxBatchGet)
			l, err := d.batchGet(ctx, bg, map[string][]map[string]av{d.table: ks[:n]}, true, keep, nil)
			if err != nil {
				return nil, err
			}
			left = append(left, l[d.table]...)
			ks = ks[n:]
		}
		ks = left
	}
	for _, k := range ks {
		out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: k, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, fmt.Errorf("read claims: %w", err)
		}
		if out.Item != nil {
			keep("", out.Item)
		}
	}
	return items, nil
}

func (d *DynamoStore) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	cs, err := d.ClaimEvent(ctx, eventRequest(req))
	if err != nil {
		return Claim{}, err
	}
	return cs[0], nil
}

// ClaimEvent takes the claims in one conditional UpdateItem of the event's
// claim item (one per 25 subscriptions), each subscription conditioned on
// the state the view saw. A refused write returns the item as it is now
// (ReturnValuesOnConditionCheckFailure ALL_OLD): the claims are planned
// again from it and the write retried, so telling completed, dead and held
// apart costs no extra read. A legacy claim is never written: completed or
// dead it is final, pending it is held until its lease ends, and then the
// event item's entry takes over.
func (d *DynamoStore) ClaimEvent(ctx context.Context, req EventClaimRequest) ([]Claim, error) {
	out := make([]Claim, len(req.Subscriptions))
	if len(req.Subscriptions) == 0 {
		return out, nil
	}
	v, err := d.view(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", req.EventID, err)
	}
	idx := make([]int, len(req.Subscriptions))
	for i := range idx {
		idx[i] = i
	}
	for len(idx) > 0 {
		n := min(len(idx), maxClaimsPerWrite)
		if err := d.claimChunk(ctx, req, v, idx[:n], out); err != nil {
			return nil, err
		}
		idx = idx[n:]
	}
	return out, nil
}

func (d *DynamoStore) claimChunk(ctx context.Context, req EventClaimRequest, v *claimView, idx []int, out []Claim) error {
	for attempt := 1; ; attempt++ {
		var take []int
		for _, i := range idx {
			sub := req.Subscriptions[i]
			e := v.effective(sub)
			switch {
			case !e.Legacy && e.Status == StatusPending && e.token != "" && e.token == req.Token:
				// Our own earlier write (its answer lost to a retry).
				out[i] = Claim{Acquired: true, Status: StatusPending, LeaseUntil: e.LeaseUntil, Attempts: e.Attempts}
			case !e.Found(), e.Status == StatusPending && e.LeaseUntil.Before(req.Now):
				take = append(take, i)
			default:
				out[i] = Claim{Status: e.Status, LeaseUntil: e.LeaseUntil, Attempts: e.Attempts}
			}
		}
		if len(take) == 0 {
			return nil
		}
		res, err := d.db.UpdateItem(ctx, d.claimInput(req, v, take))
		var ccf *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			old := decodeEventItem(req.EventID, res.Attributes)
			for _, i := range take {
				sub := req.Subscriptions[i]
				prev, had := old.entries[sub]
				if !had {
					prev = entry{ClaimRecord: v.legacy[sub]} // zero when there is none
				}
				out[i] = Claim{Acquired: true, TakenOver: prev.Status == StatusPending, Status: StatusPending,
					LeaseUntil: req.LeaseUntil, Attempts: prev.Attempts + 1}
			}
			return nil
		case errors.As(err, &ccf) && attempt < maxClaimTries:
			v.eventItem = decodeEventItem(req.EventID, ccf.Item)
		case conflicted(err) && attempt < maxClaimTries:
			if err := pause(ctx, attempt); err != nil {
				return fmt.Errorf("claim %s: %w", req.EventID, err)
			}
		default:
			return fmt.Errorf("claim %s (%d subscriptions, try %d): %w", req.EventID, len(take), attempt, err)
		}
	}
}

// claimInput is the UpdateItem that takes the subscriptions take of req,
// each conditioned on the state v holds: absent from the item (a legacy
// claim is not in it), or pending with an expired lease. The TTL is set
// only when the item holds no dead entry, and then on that condition.
func (d *DynamoStore) claimInput(req EventClaimRequest, v *claimView, take []int) *dynamodb.UpdateItemInput {
	x := newExprs()
	var sets, conds []string
	for _, i := range take {
		sub := req.Subscriptions[i]
		if _, ok := v.entries[sub]; ok { // pending, lease expired: take it over in place
			p := func(a string) string { return x.path(sub, a) }
			pending, up := x.str(keys.ClaimPending), x.value("up", ms(req.Now))
			lu, tok := x.value("lu", ms(req.LeaseUntil)), x.str(req.Token)
			sets = append(sets, p(keys.ClaimFieldStatus)+" = "+pending, p(keys.ClaimFieldLeaseUntil)+" = "+lu, p(keys.ClaimFieldToken)+" = "+tok,
				p(keys.ClaimFieldAttempts)+" = "+p(keys.ClaimFieldAttempts)+" + "+x.value("one", n(1)), p(keys.ClaimFieldUpdatedAt)+" = "+up)
			conds = append(conds, fmt.Sprintf("(%s = %s AND %s < %s)", p(keys.ClaimFieldStatus), pending, p(keys.ClaimFieldLeaseUntil), x.value("now", ms(req.Now))))
			continue
		}
		m := map[string]av{keys.ClaimFieldStatus: s(keys.ClaimPending), keys.ClaimFieldLeaseUntil: ms(req.LeaseUntil), keys.ClaimFieldToken: s(req.Token),
			keys.ClaimFieldAttempts: n(1), keys.ClaimFieldUpdatedAt: ms(req.Now)}
		if l, ok := v.legacy[sub]; ok { // an expired legacy claim: carry its count on
			m[keys.ClaimFieldAttempts] = n(int64(l.Attempts + 1))
			if l.Error != "" {
				m[keys.ClaimFieldError] = s(l.Error)
			}
		}
		a := x.name(keys.AttrSubClaimPrefix + sub)
		sets = append(sets, a+" = "+x.value("", &types.AttributeValueMemberM{Value: m}))
		conds = append(conds, "attribute_not_exists("+a+")")
	}
	sets = append(sets, x.name(keys.AttrTenant)+" = "+x.str(req.Tenant), x.name(keys.AttrType)+" = "+x.str(req.Type),
		x.name(keys.AttrSeq)+" = "+x.value("seq", n(req.Seq)))
	if !v.dead {
		sets = append(sets, x.name(keys.AttrExpiresAt)+" = "+x.value("exp", n(req.ExpiresAt.Unix())))
		conds = append(conds, "attribute_not_exists("+x.name(keys.AttrDeadSubs)+")")
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(d.table),
		Key:                                 eventClaimKey(req.EventID),
		UpdateExpression:                    aws.String("SET " + strings.Join(sets, ", ")),
		ConditionExpression:                 aws.String(strings.Join(conds, " AND ")),
		ExpressionAttributeNames:            x.names,
		ExpressionAttributeValues:           x.values,
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// ClaimDead takes a dead entry (or an expired pending one) for replay, in
// place. A dead claim of the earlier layout is moved into the event's claim
// item, taken, and its legacy item deleted.
func (d *DynamoStore) ClaimDead(ctx context.Context, req ClaimRequest) (Claim, error) {
	sub := req.Subscription
	for attempt := 1; ; attempt++ {
		x := newExprs()
		p := func(a string) string { return x.path(sub, a) }
		pending := x.str(keys.ClaimPending)
		set := fmt.Sprintf("SET %s = %s, %s = %s, %s = %s, %s = %s + %s, %s = %s", p(keys.ClaimFieldStatus), pending, p(keys.ClaimFieldLeaseUntil), x.value("lu", ms(req.LeaseUntil)),
			p(keys.ClaimFieldToken), x.str(req.Token), p(keys.ClaimFieldAttempts), p(keys.ClaimFieldAttempts), x.value("one", n(1)), p(keys.ClaimFieldUpdatedAt), x.value("up", ms(req.Now)))
		cond := fmt.Sprintf("%s = %s OR (%s = %s AND %s < %s)", p(keys.ClaimFieldStatus), x.str(keys.ClaimDead), p(keys.ClaimFieldStatus), pending, p(keys.ClaimFieldLeaseUntil), x.value("now", ms(req.Now)))
		res, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(d.table), Key: eventClaimKey(req.EventID), UpdateExpression: aws.String(set), ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: x.names, ExpressionAttributeValues: x.values,
			ReturnValues: types.ReturnValueAllOld, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var ccf *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			old := decodeEventItem(req.EventID, res.Attributes).entries[sub]
			return Claim{Acquired: true, TakenOver: old.Status == StatusPending, Status: StatusPending, LeaseUntil: req.LeaseUntil, Attempts: old.Attempts + 1}, nil
		case errors.As(err, &ccf):
			if e, ok := decodeEventItem(req.EventID, ccf.Item).entries[sub]; ok {
				return Claim{Status: e.Status, LeaseUntil: e.LeaseUntil, Attempts: e.Attempts}, nil
			}
			c, moved, err := d.claimLegacyDead(ctx, req)
			if moved || err != nil || attempt >= maxClaimTries {
				return c, err
			}
			// The entry appeared meanwhile: claim it in place.
		case conflicted(err) && attempt < maxClaimTries:
			if err := pause(ctx, attempt); err != nil {
				return Claim{}, fmt.Errorf("replay claim %s: %w", req.Key, err)
			}
		default:
			return Claim{}, fmt.Errorf("replay claim %s: %w", req.Key, err)
		}
	}
}

// claimLegacyDead takes a dead (or expired pending) claim of the earlier
// layout for replay: it writes the entry, taken, into the event's claim
// item (conditioned on its absence) and deletes the legacy item. moved is
// false when the entry appeared meanwhile (the caller claims it in place).
func (d *DynamoStore) claimLegacyDead(ctx context.Context, req ClaimRequest) (c Claim, moved bool, err error) {
	out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: legacyClaimKey(req.Key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Claim{}, false, fmt.Errorf("replay claim %s: read the legacy claim: %w", req.Key, err)
	}
	if out.Item == nil {
		return Claim{}, true, fmt.Errorf("replay %s: %w", req.Key, ErrNotDead)
	}
	r := decodeClaim(out.Item)
	if r.Status != StatusDead && !(r.Status == StatusPending && r.LeaseUntil.Before(req.Now)) {
		return Claim{Status: r.Status, LeaseUntil: r.LeaseUntil, Attempts: r.Attempts}, true, nil
	}
	v := &claimView{eventItem: eventItem{entries: map[string]entry{}, dead: true}, legacy: map[string]ClaimRecord{req.Subscription: r}}
	in := d.claimInput(EventClaimRequest{EventID: req.EventID, Tenant: req.Tenant, Type: req.Type, Seq: req.Seq, SchemaVersion: req.SchemaVersion,
		Subscriptions: []string{req.Subscription}, Token: req.Token, Now: req.Now, LeaseUntil: req.LeaseUntil}, v, []int{0})
	for attempt := 1; ; attempt++ {
		_, err = d.db.UpdateItem(ctx, in)
		if !conflicted(err) || attempt >= maxClaimTries {
			break
		}
		if err := pause(ctx, attempt); err != nil {
			return Claim{}, false, err
		}
	}
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return Claim{}, false, nil
	case err != nil:
		return Claim{}, false, fmt.Errorf("replay claim %s: move the legacy claim: %w", req.Key, err)
	}
	// The event item's entry now stands for it; a legacy item left behind
	// (this delete failing) is shadowed by that entry.
	if del, ok := d.db.(interface {
		DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	}); ok {
		_, _ = del.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(d.table), Key: legacyClaimKey(req.Key)})
	}
	return Claim{Acquired: true, TakenOver: r.Status == StatusPending, Status: StatusPending, LeaseUntil: req.LeaseUntil, Attempts: r.Attempts + 1}, true, nil
}

// Complete is one conditional UpdateItem of sub's entry (on its token),
// which also renews the item's TTL unless the item holds a dead entry: then
// (the write refused on that alone) it is written again without the TTL.
// A zero expiresAt leaves the TTL alone from the start.
func (d *DynamoStore) Complete(ctx context.Context, k Key, token string, now, expiresAt time.Time) error {
	ttl := !expiresAt.IsZero()
	for attempt := 1; ; attempt++ {
		x := newExprs()
		p := func(a string) string { return x.path(k.Subscription, a) }
		set := fmt.Sprintf("SET %s = %s, %s = %s", p(keys.ClaimFieldStatus), x.str(keys.ClaimCompleted), p(keys.ClaimFieldUpdatedAt), x.value("up", ms(now)))
		cond := fmt.Sprintf("%s = %s AND %s = %s", p(keys.ClaimFieldStatus), x.str(keys.ClaimPending), p(keys.ClaimFieldToken), x.str(token))
		if ttl {
			set += ", " + x.name(keys.AttrExpiresAt) + " = " + x.value("exp", n(expiresAt.Unix()))
			cond += " AND attribute_not_exists(" + x.name(keys.AttrDeadSubs) + ")"
		}
		_, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(d.table), Key: eventClaimKey(k.EventID), UpdateExpression: aws.String(set + " REMOVE " + p(keys.ClaimFieldToken) + ", " + p(keys.ClaimFieldLeaseUntil)),
			ConditionExpression: aws.String(cond), ExpressionAttributeNames: x.names, ExpressionAttributeValues: x.values,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var ccf *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ccf):
			e := decodeEventItem(k.EventID, ccf.Item).entries[k.Subscription]
			if ttl && e.Status == StatusPending && e.token == token {
				ttl = false // a sibling is dead: the item keeps no TTL
				continue
			}
			return fmt.Errorf("complete %s: %w", k, ErrLeaseLost)
		case conflicted(err) && attempt < maxClaimTries:
			if err := pause(ctx, attempt); err != nil {
				return fmt.Errorf("complete %s: %w", k, err)
			}
		default:
			return fmt.Errorf("complete %s: %w", k, err)
		}
	}
}

// update is one Update action of a transaction.
type update struct {
	table, expr, cond string
	key               map[string]av
	names             map[string]string
	values            map[string]av
}

func (u update) condition() *string {
	if u.cond == "" {
		return nil
	}
	return aws.String(u.cond)
}

func (u update) toTransact() types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{TableName: aws.String(u.table), Key: u.key, UpdateExpression: aws.String(u.expr),
		ConditionExpression: u.condition(), ExpressionAttributeNames: u.names, ExpressionAttributeValues: u.values}}
}

// entryUpdate is the transactional update of sub's entry held with token:
// status becomes to, the token goes, and the dead set takes (Kill) or loses
// (Resolve) the subscription.
func (d *DynamoStore) entryUpdate(k Key, token string, to string, at time.Time, errText string) update {
	x := newExprs()
	p := func(a string) string { return x.path(k.Subscription, a) }
	set := fmt.Sprintf("SET %s = %s, %s = %s", p(keys.ClaimFieldStatus), x.str(to), p(keys.ClaimFieldUpdatedAt), x.value("up", ms(at)))
	rest := " REMOVE " + p(keys.ClaimFieldToken) + ", " + p(keys.ClaimFieldLeaseUntil)
	sub := x.value("sub", &types.AttributeValueMemberSS{Value: []string{k.Subscription}})
	if to == keys.ClaimDead {
		set += ", " + p(keys.ClaimFieldError) + " = " + x.value("err", s(errText))
		rest += ", " + x.name(keys.AttrExpiresAt) + " ADD " + x.name(keys.AttrDeadSubs) + " " + sub
	} else {
		rest += " DELETE " + x.name(keys.AttrDeadSubs) + " " + sub
	}
	return update{table: d.table, key: eventClaimKey(k.EventID), expr: set + rest,
		cond:  fmt.Sprintf("%s = %s AND %s = %s", p(keys.ClaimFieldStatus), x.str(keys.ClaimPending), p(keys.ClaimFieldToken), x.str(token)),
		names: x.names, values: x.values}
}

// Kill marks the entry dead, takes the item's TTL away (a dead claim never
// expires) and writes the dead letter, in one transaction.
func (d *DynamoStore) Kill(ctx context.Context, k Key, token string, dl DeadLetter, replay bool) error {
	inc := int64(0)
	if replay {
		inc = 1
	}
	claim := d.entryUpdate(k, token, keys.ClaimDead, dl.DeadAt, dl.Error)
	letter := update{
		table: d.table, key: deadKey(dl.Tenant, k),
		expr: "SET #tn = :tn, #id = :id, #sub = :sub, #ty = :ty, #seq = :seq, #sv = :sv, #err = :err, #att = :att, " +
			"#da = :da, #rp = if_not_exists(#rp, :zero) + :inc, #ix = :ix",
		names: map[string]string{"#tn": keys.AttrTenant, "#id": keys.AttrID, "#sub": keys.AttrSubscription, "#ty": keys.AttrType,
			"#seq": keys.AttrSeq, "#sv": keys.AttrSchemaVersion, "#err": keys.AttrError, "#att": keys.AttrAttempts, "#da": keys.AttrDeadAt,
			"#rp": keys.AttrReplays, "#ef": keys.AttrEffect, "#ix": keys.AttrDeadIndex},
		values: map[string]av{":tn": s(dl.Tenant), ":id": s(dl.EventID), ":sub": s(dl.Subscription), ":ty": s(dl.Type),
			":seq": n(dl.Seq), ":sv": n(int64(dl.SchemaVersion)), ":err": s(dl.Error), ":att": n(int64(dl.Attempts)),
			":da": ts(dl.DeadAt), ":zero": n(0), ":inc": n(inc), ":ix": s(keys.DeadIndexValue)},
	}
	if dl.Effect != "" {
		letter.expr += ", #ef = :ef"
		letter.values[":ef"] = s(dl.Effect)
	} else {
		letter.expr += " REMOVE #ef" // a replay that failed otherwise: no effect awaits a decision
	}
	return leaseErr(d.transact(ctx, claim.toTransact(), letter.toTransact()), "dead-letter "+k.String())
}

// Resolve marks the entry completed and moves its dead letter into the
// tenant's history of resolved dead letters (who, when, how; expiring after
// keys.DeadLetterHistoryDays), in one transaction; then, if the item holds
// no dead entry any more, it gives the item its TTL back (a separate write
// on the replay path; if it fails the item just keeps no TTL).
func (d *DynamoStore) Resolve(ctx context.Context, k Key, tenant, token string, now, expiresAt time.Time) error {
	claim := d.entryUpdate(k, token, keys.ClaimCompleted, now, "")
	items := []types.TransactWriteItem{claim.toTransact(), {Delete: &types.Delete{TableName: aws.String(d.table), Key: deadKey(tenant, k)}}}
	out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: deadKey(tenant, k), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return fmt.Errorf("resolve %s: read its dead letter: %w", k, err)
	}
	if out.Item != nil {
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(d.table),
			Item: resolvedItem(decodeDead(out.Item), d.resolver(), keys.ResolvedReplayed, now)}})
	}
	if err := d.transact(ctx, items...); err != nil {
		return leaseErr(err, "resolve "+k.String())
	}
	for attempt := 1; attempt <= maxClaimTries; attempt++ {
		_, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(d.table), Key: eventClaimKey(k.EventID),
			UpdateExpression:          aws.String("SET #exp = :exp"),
			ConditionExpression:       aws.String("attribute_exists(#pk) AND attribute_not_exists(#ds)"),
			ExpressionAttributeNames:  map[string]string{"#exp": keys.AttrExpiresAt, "#pk": keys.AttrPK, "#ds": keys.AttrDeadSubs},
			ExpressionAttributeValues: map[string]av{":exp": n(expiresAt.Unix())},
		})
		if !conflicted(err) || pause(ctx, attempt) != nil {
			break
		}
	}
	return nil
}

// transact runs a transaction, again after a transaction conflict.
func (d *DynamoStore) transact(ctx context.Context, items ...types.TransactWriteItem) error {
	for attempt := 1; ; attempt++ {
		_, err := d.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if !conflicted(err) || attempt >= maxClaimTries {
			return err
		}
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
}

// conflicted reports whether err is a transaction conflict, which changed
// nothing and is worth retrying: a single-item write that met an ongoing
// transaction on its item (TransactionConflictException), or a transaction
// that met another one, or a write in progress, on one of its items
// (TransactionCanceledException with a TransactionConflict reason). The
// SDK's retryer does not retry either. Siblings completing on one claim item
// while another delivery dead-letters one of them meet exactly this.
func conflicted(err error) bool {
	if err == nil {
		return false
	}
	var tc *types.TransactionConflictException
	if errors.As(err, &tc) {
		return true
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) == "TransactionConflict" {
				return true
			}
		}
	}
	return false
}

// pause waits before try attempt+1 after a conflict: 10 ms doubling up to
// 640 ms, with jitter, so a transaction (at most a few hundred ms even with
// a wide conflict window) is over before the last try.
func pause(ctx context.Context, attempt int) error {
	d := 10 * time.Millisecond << min(attempt-1, 6)
	d = d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// leaseErr maps a failed claim condition to ErrLeaseLost. In a transaction
// the claim is always the first action.
func leaseErr(err error, op string) error {
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("%s: %w", op, ErrLeaseLost)
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
		return fmt.Errorf("%s: %w", op, ErrLeaseLost)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Get reads a claim: the event item's entry, else the legacy per-pair claim
// (Legacy set).
func (d *DynamoStore) Get(ctx context.Context, k Key) (ClaimRecord, bool, error) {
	out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: eventClaimKey(k.EventID), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return ClaimRecord{}, false, fmt.Errorf("read claim %s: %w", k, err)
	}
	if e, ok := decodeEventItem(k.EventID, out.Item).entries[k.Subscription]; ok {
		return e.ClaimRecord, true, nil
	}
	out, err = d.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: legacyClaimKey(k), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return ClaimRecord{}, false, fmt.Errorf("read legacy claim %s: %w", k, err)
	}
	if out.Item == nil {
		return ClaimRecord{}, false, nil
	}
	r := decodeClaim(out.Item)
	r.Key, r.Legacy = k, true
	return r, true, nil
}

func (d *DynamoStore) DeadLetters(ctx context.Context, tenant, cursor string, limit int32) ([]DeadLetter, string, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(d.table),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": keys.AttrPK},
		ExpressionAttributeValues: map[string]av{":pk": s(keys.StateDeadPrefix + tenant)},
	}
	if limit > 0 {
		in.Limit = aws.Int32(limit)
	}
	if cursor != "" {
		in.ExclusiveStartKey = map[string]av{keys.AttrPK: s(keys.StateDeadPrefix + tenant), keys.AttrSK: s(cursor)}
	}
	out, err := d.db.Query(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("list dead letters of tenant %q: %w", tenant, err)
	}
	var dls []DeadLetter
	for _, it := range out.Items {
		dls = append(dls, decodeDead(it))
	}
	next := ""
	if sk, ok := out.LastEvaluatedKey[keys.AttrSK].(*types.AttributeValueMemberS); ok {
		next = sk.Value
	}
	return dls, next, nil
}

func (d *DynamoStore) CountDeadLetters(ctx context.Context, tenant string) (int, error) {
	total := 0
	var start map[string]av
	for {
		out, err := d.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(d.table),
			ConsistentRead:            aws.Bool(true),
			KeyConditionExpression:    aws.String("#pk = :pk"),
			ExpressionAttributeNames:  map[string]string{"#pk": keys.AttrPK},
			ExpressionAttributeValues: map[string]av{":pk": s(keys.StateDeadPrefix + tenant)},
			Select:                    types.SelectCount,
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return 0, fmt.Errorf("count dead letters of tenant %q: %w", tenant, err)
		}
		total += int(out.Count)
		if out.LastEvaluatedKey == nil {
			return total, nil
		}
		start = out.LastEvaluatedKey
	}
}

func str(it map[string]av, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func num(it map[string]av, name string) int64 {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		x, _ := strconv.ParseInt(v.Value, 10, 64)
		return x
	}
	return 0
}

func when(it map[string]av, name string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, str(it, name))
	return t
}

func decodeClaim(it map[string]av) ClaimRecord {
	r := ClaimRecord{
		Key:      Key{EventID: str(it, keys.AttrID), Subscription: str(it, keys.AttrSubscription)},
		Tenant:   str(it, keys.AttrTenant),
		Status:   Status(str(it, keys.AttrStatus)),
		Attempts: int(num(it, keys.AttrAttempts)),
		Error:    str(it, keys.AttrError),
	}
	if lu := num(it, keys.AttrLeaseUntil); lu > 0 {
		r.LeaseUntil = time.UnixMilli(lu)
	}
	if exp := num(it, keys.AttrExpiresAt); exp > 0 {
		r.ExpiresAt = time.Unix(exp, 0)
	}
	return r
}

func decodeDead(it map[string]av) DeadLetter {
	d := DeadLetter{
		Tenant:        str(it, keys.AttrTenant),
		EventID:       str(it, keys.AttrID),
		Subscription:  str(it, keys.AttrSubscription),
		Type:          str(it, keys.AttrType),
		Seq:           num(it, keys.AttrSeq),
		SchemaVersion: int(num(it, keys.AttrSchemaVersion)),
		Error:         str(it, keys.AttrError),
		Attempts:      int(num(it, keys.AttrAttempts)),
		Replays:       int(num(it, keys.AttrReplays)),
		DeadAt:        when(it, keys.AttrDeadAt),
		Effect:        str(it, keys.AttrEffect),
	}
	if d.EventID == "" { // fall back on the sort key
		d.EventID, d.Subscription, _ = strings.Cut(str(it, keys.AttrSK), ":")
	}
	return d
}

// resolver is who resolves dead letters through this store.
func (d *DynamoStore) resolver() string {
	if d.by != "" {
		return d.by
	}
	return keys.FnDLQRepair
}

// ResolvedBy returns a copy of d that records who as the resolver of the
// dead letters it resolves (default dlq-repair's function name).
func (d *DynamoStore) ResolvedBy(who string) *DynamoStore {
	c := *d
	c.by = who
	return &c
}

func deadLogKey(tenant string, k Key) map[string]av {
	return map[string]av{keys.AttrPK: s(keys.StateDeadLogPrefix + tenant), keys.AttrSK: s(k.String())}
}

// resolvedItem is the history row of dl, resolved by who, how, at.
func resolvedItem(dl DeadLetter, who, how string, at time.Time) map[string]av {
	it := deadLogKey(dl.Tenant, dl.Key())
	for k, v := range map[string]av{
		keys.AttrTenant: s(dl.Tenant), keys.AttrID: s(dl.EventID), keys.AttrSubscription: s(dl.Subscription), keys.AttrType: s(dl.Type),
		keys.AttrSeq: n(dl.Seq), keys.AttrSchemaVersion: n(int64(dl.SchemaVersion)), keys.AttrError: s(dl.Error),
		keys.AttrAttempts: n(int64(dl.Attempts)), keys.AttrReplays: n(int64(dl.Replays)), keys.AttrDeadAt: ts(dl.DeadAt),
		keys.AttrResolvedAt: ts(at), keys.AttrResolvedBy: s(who), keys.AttrResolvedHow: s(how),
		keys.AttrExpiresAt: n(at.Add(keys.DeadLetterHistoryDays * 24 * time.Hour).Unix()),
	} {
		it[k] = v
	}
	return it
}

// ResolvedDeadLetter is a dead letter as kept in the history after it was
// resolved.
type ResolvedDeadLetter struct {
	DeadLetter
	ResolvedAt time.Time
	ResolvedBy string
	How        string
	ExpiresAt  time.Time
}

// ResolvedDeadLetters lists a tenant's resolved dead letters (kept for
// keys.DeadLetterHistoryDays) in key order, a page at a time: pass the
// returned cursor back; "" means done.
func (d *DynamoStore) ResolvedDeadLetters(ctx context.Context, tenant, cursor string, limit int32) ([]ResolvedDeadLetter, string, error) {
	in := &dynamodb.QueryInput{
		TableName: aws.String(d.table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": keys.AttrPK},
		ExpressionAttributeValues: map[string]av{":pk": s(keys.StateDeadLogPrefix + tenant)},
	}
	if limit > 0 {
		in.Limit = aws.Int32(limit)
	}
	if cursor != "" {
		in.ExclusiveStartKey = map[string]av{keys.AttrPK: s(keys.StateDeadLogPrefix + tenant), keys.AttrSK: s(cursor)}
	}
	out, err := d.db.Query(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("list resolved dead letters of tenant %q: %w", tenant, err)
	}
	var rs []ResolvedDeadLetter
	for _, it := range out.Items {
		rs = append(rs, ResolvedDeadLetter{DeadLetter: decodeDead(it), ResolvedAt: when(it, keys.AttrResolvedAt),
			ResolvedBy: str(it, keys.AttrResolvedBy), How: str(it, keys.AttrResolvedHow), ExpiresAt: time.Unix(num(it, keys.AttrExpiresAt), 0).UTC()})
	}
	next := ""
	if sk, ok := out.LastEvaluatedKey[keys.AttrSK].(*types.AttributeValueMemberS); ok {
		next = sk.Value
	}
	return rs, next, nil
}

// StateTableSchema is the state table as infra/ deploys it (pk, sk strings):
// claims, dead letters, sent logs, parked projections and reconcile
// checkpoints live there. For tests and local runs that create the table
// themselves.
func StateTableSchema(name string) *dynamodb.CreateTableInput {
	in := keys.PKSKTable(name)
	in.AttributeDefinitions = append(in.AttributeDefinitions,
		types.AttributeDefinition{AttributeName: aws.String(keys.AttrDeadIndex), AttributeType: types.ScalarAttributeTypeS},
		types.AttributeDefinition{AttributeName: aws.String(keys.AttrTenant), AttributeType: types.ScalarAttributeTypeS})
	in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{
		IndexName: aws.String(keys.IndexDeadTenants),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(keys.AttrDeadIndex), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(keys.AttrTenant), KeyType: types.KeyTypeRange},
		},
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
	}}
	return in
}

// DeadLetterTenants lists the tenants with open dead letters from the
// dead-letter index (keys.IndexDeadTenants), a page of up to limit tenants
// at a time after the tenant cursor names: one Query per tenant, never a
// read of the table. The index is eventually consistent: a dead letter
// written a moment ago may be found on the next call.
func (d *DynamoStore) DeadLetterTenants(ctx context.Context, cursor string, limit int) ([]string, string, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []string
	after := cursor
	for len(out) < limit {
		in := &dynamodb.QueryInput{
			TableName: aws.String(d.table), IndexName: aws.String(keys.IndexDeadTenants),
			KeyConditionExpression:    aws.String("#ix = :ix"),
			ExpressionAttributeNames:  map[string]string{"#ix": keys.AttrDeadIndex},
			ExpressionAttributeValues: map[string]av{":ix": s(keys.DeadIndexValue)},
			Limit:                     aws.Int32(1),
		}
		if after != "" {
			in.KeyConditionExpression = aws.String("#ix = :ix AND #tn > :after")
			in.ExpressionAttributeNames["#tn"] = keys.AttrTenant
			in.ExpressionAttributeValues[":after"] = s(after)
		}
		res, err := d.db.Query(ctx, in)
		if err != nil {
			return out, after, fmt.Errorf("list the tenants with dead letters (index %s): %w", keys.IndexDeadTenants, err)
		}
		if len(res.Items) == 0 {
			return out, "", nil
		}
		after = str(res.Items[0], keys.AttrTenant)
		out = append(out, after)
	}
	return out, after, nil
}
