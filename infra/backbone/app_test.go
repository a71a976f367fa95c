package backbone

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/infra/backbone/backbonetest"
	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Another small application with its own domain, to prove the construct is
// built from the application and not from any one of them: library tracks
// BOOK and lends books (DURABLE, reading LOANS_TABLE); shelf projects books
// (BEST_EFFORT, reading SHELF_TABLE).
const (
	envBooks = "LIBRARY_BOOKS_TABLE"
	envLoans = "LIBRARY_LOANS_TABLE"
	envShelf = "LIBRARY_SHELF_TABLE"
)

type lentV1 struct {
	Book string `json:"book"`
}

type librarian struct{}

func (librarian) handle(context.Context, envelope.Envelope) error { return nil }

var libraryModule = catalog.Module[librarian]{
	Name:   "library",
	Emits:  []catalog.EventType{{Name: "library.book-lent", Versions: []catalog.Version{catalog.V[lentV1](1)}}},
	Tracks: []catalog.Entity{{Name: "BOOK", TableEnv: envBooks, TenantAttr: "tenant", IDAttr: "isbn", VersionAttr: "version"}},
	Subscribes: []catalog.Subscription[librarian]{
		{Name: "library.remind", Types: "library.book-lent", Lane: catalog.Durable, Reads: []int{1}, Handler: librarian.handle},
	},
}

var shelfModule = catalog.Module[librarian]{
	Name: "shelf",
	Subscribes: []catalog.Subscription[librarian]{
		{Name: "shelf.project", Types: "record.*.BOOK", Lane: catalog.BestEffort, Reads: []int{1}, Handler: librarian.handle},
	},
}

func bindLibrarian(m catalog.Module[librarian]) func(app.Runtime) (app.Bound, error) {
	return func(app.Runtime) (app.Bound, error) { return app.Bound{Binding: m.Bind(librarian{})}, nil }
}

var libraryApp = app.Application{
	Name: "library",
	Modules: []app.Module{
		{Spec: libraryModule.Spec(), Bind: bindLibrarian(libraryModule), Env: []string{envLoans}},
		{Spec: shelfModule.Spec(), Bind: bindLibrarian(shelfModule), Env: []string{envShelf}},
	},
}

// libraryStack is the library's own stack: its tables and the backbone.
type libraryStack struct {
	stack                     *Backbone
	st                        awscdk.Stack
	doc                       map[string]any
	errors                    []string
	booksID, loansID, shelfID string
}

// synthLibrary builds the library's stack; edit changes its props (and may
// replace its tables) before the backbone is added.
func synthLibrary(t *testing.T, edit func(st awscdk.Stack, p *Props)) *libraryStack {
	t.Helper()
	var books, loans, shelf awsdynamodb.ITable
	var b *Backbone
	st := newLibraryStack(t, func(st awscdk.Stack, p *Props) {
		books, loans, shelf = p.Tracked["BOOK"], p.Tables[envLoans], p.Tables[envShelf]
		if edit != nil {
			edit(st, p)
		}
	}, func(bb *Backbone) { b = bb })
	ls := &libraryStack{st: st, stack: b}
	ls.booksID, ls.loansID, ls.shelfID = ls.id(books), ls.id(loans), ls.id(shelf)
	for _, m := range *assertions.Annotations_FromStack(st).FindError(jsii.String("*"), assertions.Match_AnyValue()) {
		ls.errors = append(ls.errors, fmt.Sprint(m.Entry.Data))
	}
	if len(ls.errors) == 0 {
		raw, err := json.Marshal(assertions.Template_FromStack(st, nil).ToJSON())
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &ls.doc); err != nil {
			t.Fatal(err)
		}
	}
	return ls
}

// newLibraryStack builds the library's stack in an app of its own, its
// functions' code staged from stand-ins, without synthesizing it: edit
// changes its props (and may add to the stack) before the backbone is added
// with UnprefixedID, after gets the backbone.
func newLibraryStack(t *testing.T, edit func(st awscdk.Stack, p *Props), after func(*Backbone)) awscdk.Stack {
	t.Helper()
	code := t.TempDir()
	if err := backbonetest.WriteCode(code); err != nil {
		t.Fatal(err)
	}
	a := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	st := awscdk.NewStack(a, jsii.String("Library"), nil)
	books := testTable(st, "Books", awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES)
	loans, shelf := testTable(st, "Loans", ""), testTable(st, "Shelf", "")
	p := &Props{
		App:        libraryApp,
		Tracked:    map[string]awsdynamodb.ITable{"BOOK": books},
		Tables:     map[string]awsdynamodb.ITable{envLoans: loans, envShelf: shelf},
		CodeRoot:   code,
		AlarmEmail: testAlarmEmail,
	}
	if edit != nil {
		edit(st, p)
	}
	b := New(st, UnprefixedID, p)
	if after != nil {
		after(b)
	}
	return st
}

// testTable is a table of the library's, with a stream of view unless it is
// empty.
func testTable(st awscdk.Stack, id string, view awsdynamodb.StreamViewType) awsdynamodb.Table {
	p := &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
	}
	if view != "" {
		p.Stream = view
	}
	return awsdynamodb.NewTable(st, jsii.String(id), p)
}

func (ls *libraryStack) id(c constructs.IConstruct) string {
	return *ls.st.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
}

func (ls *libraryStack) synthesized() *synthesized {
	return &synthesized{Synthesis: &backbonetest.Synthesis{Doc: ls.doc}}
}

// TestSecondApplication: a stack built from the library application maps
// BOOK's stream to changefeed, gives each lane's functions the environment
// of the modules bound there, and grants exactly that.
func TestSecondApplication(t *testing.T) {
	ls := synthLibrary(t, nil)
	if len(ls.errors) > 0 {
		t.Fatalf("synthesis errors: %v", ls.errors)
	}
	s := ls.synthesized()
	b := ls.stack
	changefeed := ls.id(b.ChangeFeed.Changefeed.Fn)

	t.Run("mappings", func(t *testing.T) {
		var feeds []string
		for id, m := range s.resources("AWS::Lambda::EventSourceMapping") {
			if cmp.Equal(props(m)["FunctionName"], ref(changefeed)) {
				feeds = append(feeds, id)
			}
		}
		if want := []string{LogicalChangeFeedESM + "BOOK"}; !cmp.Equal(feeds, want) {
			t.Fatalf("changefeed's mappings %v, want %v", feeds, want)
		}
		m := props(s.resources("AWS::Lambda::EventSourceMapping")[feeds[0]])
		for k, v := range map[string]any{
			"EventSourceArn":    getAtt(ls.booksID, "StreamArn"),
			"StartingPosition":  "TRIM_HORIZON",
			"DestinationConfig": map[string]any{"OnFailure": map[string]any{"Destination": getAtt(LogicalChangeFeedDLQ, "Arn")}},
		} {
			if diff := cmp.Diff(v, m[k]); diff != "" {
				t.Errorf("%s (-want +got):\n%s", k, diff)
			}
		}
	})

	t.Run("environment", func(t *testing.T) {
		fns := s.resources("AWS::Lambda::Function")
		for _, tt := range []struct {
			fn       Function
			has, not []string
		}{
			{b.Durable.DurableConsumer, []string{envLoans}, []string{envShelf, envBooks}},
			{b.ChangeFeed.Changefeed, []string{envShelf, envBooks}, []string{envLoans}},
			{b.Repair.Function, []string{envLoans, envShelf, envBooks}, nil},
			{b.Durable.StreamFilter, nil, []string{envLoans, envShelf, envBooks}},
			{b.Reconcile.Function, nil, []string{envLoans, envShelf, envBooks}},
		} {
			vars, _ := props(fns[ls.id(tt.fn.Fn)])["Environment"].(map[string]any)["Variables"].(map[string]any)
			want := map[string]any{envLoans: ref(ls.loansID), envShelf: ref(ls.shelfID), envBooks: ref(ls.booksID)}
			for _, name := range tt.has {
				if diff := cmp.Diff(want[name], vars[name]); diff != "" {
					t.Errorf("%s: %s (-want +got):\n%s", tt.fn.name, name, diff)
				}
			}
			for _, name := range tt.not {
				if v, ok := vars[name]; ok {
					t.Errorf("%s has %s = %v; its modules do not read it", tt.fn.name, name, v)
				}
			}
		}
	})

	t.Run("grants", func(t *testing.T) {
		gs := grants(s.Doc)
		rw, read, stream := sorted(tableRead, tableWrite), sorted(tableRead), sorted(streamRead)
		app := func(f Function) map[string][]string {
			got := map[string][]string{}
			for k, v := range access(gs, ls.id(f.Role)) {
				for _, own := range []string{ls.booksID, ls.loansID, ls.shelfID} {
					if k == own+".Arn" || k == own+".StreamArn" {
						got[k] = v
					}
				}
			}
			return got
		}
		for _, tt := range []struct {
			fn   Function
			want map[string][]string
		}{
			{b.Durable.DurableConsumer, map[string][]string{ls.loansID + ".Arn": rw}},
			{b.ChangeFeed.Changefeed, map[string][]string{
				ls.shelfID + ".Arn": rw, ls.booksID + ".Arn": read, ls.booksID + ".StreamArn": stream,
			}},
			{b.Repair.Function, map[string][]string{
				ls.loansID + ".Arn": rw, ls.shelfID + ".Arn": rw, ls.booksID + ".Arn": read, ls.booksID + ".StreamArn": stream,
			}},
			{b.Durable.StreamFilter, map[string][]string{}},
			{b.Reconcile.Function, map[string][]string{}},
			{b.Tamper.Function, map[string][]string{}},
		} {
			if diff := cmp.Diff(tt.want, app(tt.fn)); diff != "" {
				t.Errorf("%s: access to the library's tables (-want +got):\n%s", tt.fn.name, diff)
			}
		}
	})

	// library.remind is DURABLE and its module declares library.book-lent:
	// its handler may emit follow-on events, so durable-consumer and
	// dlq-repair may append to the log, exactly as Emit does (Put and
	// ConditionCheck, only inside TransactWriteItems) and nothing more. The
	// widget workshop's DURABLE module declares no type, and its functions
	// only read the log (TestRoleAccess).
	t.Run("follow-on grant", func(t *testing.T) {
		gs := grants(s.Doc)
		for _, f := range []Function{b.Durable.DurableConsumer, b.Repair.Function} {
			role := ls.id(f.Role)
			got := access(gs, role)[LogicalEventsTable+".Arn"]
			if want := sorted(tableRead, logAppendWrite); !cmp.Equal(got, want) {
				t.Errorf("%s on the events table: %v, want %v", f.name, got, want)
			}
			var appends []grant
			for _, g := range gs {
				if slices.Contains(g.Roles, role) && slices.Contains(g.Actions, "dynamodb:PutItem") &&
					cmp.Equal(g.Resources, []any{getAtt(LogicalEventsTable, "Arn")}) {
					appends = append(appends, g)
				}
			}
			want := map[string]any{"ForAnyValue:StringEquals": map[string]any{"dynamodb:EnclosingOperation": []any{"TransactWriteItems"}}}
			if len(appends) != 1 || !cmp.Equal(appends[0].Condition, want) || !cmp.Equal(sorted(appends[0].Actions), sorted(logAppendWrite)) {
				t.Errorf("%s: PutItem on the log granted by %+v; want one statement of %v conditioned on %v", f.name, appends, logAppendWrite, want)
			}
		}
		for _, f := range []Function{b.Durable.StreamFilter, b.Reconcile.Function, b.ChangeFeed.Changefeed, b.Tamper.Function} {
			if got := access(gs, ls.id(f.Role))[LogicalEventsTable+".Arn"]; slices.Contains(got, "dynamodb:PutItem") {
				t.Errorf("%s may put on the events table: %v", f.name, got)
			}
		}
	})

	t.Run("tags and alarms", func(t *testing.T) {
		tags, _ := json.Marshal(props(s.resources("AWS::Lambda::Function")[changefeed])["Tags"])
		if want := `{"Key":"app","Value":"library"}`; !regexp.MustCompile(regexp.QuoteMeta(want)).Match(tags) {
			t.Errorf("changefeed's tags %s lack %s", tags, want)
		}
		desc := props(s.resources("AWS::CloudWatch::Alarm")[ls.id(b.Alarms.ByName["ChangeFeedIteratorAge"])])["AlarmDescription"].(string)
		if want := "the library application's tracked streams (BOOK)"; !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(desc) {
			t.Errorf("ChangeFeedIteratorAge description %q does not name %q", desc, want)
		}
	})
}

// TestApplicationPropsErrors: what the application needs and the props
// lack fails the synthesis with an error naming it and what to give.
func TestApplicationPropsErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(st awscdk.Stack, p *Props)
		want string // a regexp the one error must match
	}{
		{"missing tracked table", func(_ awscdk.Stack, p *Props) { p.Tracked = nil },
			`tracks entity BOOK: give its table .* in Props.Tracked\["BOOK"\]`},
		{"missing env table", func(_ awscdk.Stack, p *Props) { delete(p.Tables, envShelf) },
			`module shelf of application library reads environment variable ` + envShelf + ` .* Props.Tables\["` + envShelf + `"\]`},
		{"stream-less tracked table", func(st awscdk.Stack, p *Props) { p.Tracked["BOOK"] = testTable(st, "Plain", "") },
			`tracked entity BOOK: its table has no stream.*Stream: NEW_AND_OLD_IMAGES`},
		{"imported stream-less tracked table", func(st awscdk.Stack, p *Props) {
			p.Tracked["BOOK"] = awsdynamodb.Table_FromTableName(st, jsii.String("Imported"), jsii.String("books"))
		}, `tracked entity BOOK: its table has no stream`},
		{"tracked table with keys only", func(st awscdk.Stack, p *Props) {
			p.Tracked["BOOK"] = testTable(st, "Keys", awsdynamodb.StreamViewType_KEYS_ONLY)
		},
			`tracked entity BOOK: its table's stream has view KEYS_ONLY.*NEW_AND_OLD_IMAGES`},
		{"untracked entity", func(_ awscdk.Stack, p *Props) { p.Tracked["BOOKS"] = p.Tracked["BOOK"] },
			`Props.Tracked\["BOOKS"\]: application library tracks no entity BOOKS`},
		{"table no module reads", func(_ awscdk.Stack, p *Props) { p.Tables["SHELVES_TABLE"] = p.Tables[envShelf] },
			`Props.Tables\["SHELVES_TABLE"\]: no DURABLE or BEST_EFFORT module of application library reads SHELVES_TABLE \(they read \[.*` + envShelf + `.*\]\): remove it`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ls := synthLibrary(t, tt.edit)
			if len(ls.errors) != 1 || !regexp.MustCompile(tt.want).MatchString(ls.errors[0]) {
				t.Errorf("synthesis errors %q, want one matching %q", ls.errors, tt.want)
			}
		})
	}
}

// TestStackHasNoErrors: the workshop's stack gives the backbone every table
// its application needs (no synthesis error of any kind), and the application
// itself validates.
func TestStackHasNoErrors(t *testing.T) {
	if err := widgetApp.Validate(); err != nil {
		t.Fatalf("the test application: %v", err)
	}
	s := synth(t)
	for _, m := range *assertions.Annotations_FromStack(s.stack.Stack).FindError(jsii.String("*"), assertions.Match_AnyValue()) {
		t.Errorf("synthesis error at %s: %v", *m.Id, m.Entry.Data)
	}
	if _, ok := s.stack.ChangeFeed.Mappings[widgetEntity]; !ok || len(s.stack.ChangeFeed.Mappings) != 1 {
		t.Errorf("changefeed's mappings %v, want %s's only", s.stack.ChangeFeed.Mappings, widgetEntity)
	}
}

// TestPerPairClaimsGone: the prop tells durable-consumer and dlq-repair
// (and no other function) that per-pair claims are gone; by default no
// function is told, so both keep reading them.
func TestPerPairClaimsGone(t *testing.T) {
	for _, gone := range []bool{false, true} {
		ls := synthLibrary(t, func(_ awscdk.Stack, p *Props) { p.PerPairClaimsGone = gone })
		if len(ls.errors) > 0 {
			t.Fatalf("synthesis errors: %v", ls.errors)
		}
		b := ls.stack
		fns := ls.synthesized().resources("AWS::Lambda::Function")
		for _, f := range []Function{b.Durable.DurableConsumer, b.Repair.Function, b.Durable.StreamFilter, b.ChangeFeed.Changefeed, b.Reconcile.Function, b.Tamper.Function} {
			vars, _ := props(fns[ls.id(f.Fn)])["Environment"].(map[string]any)["Variables"].(map[string]any)
			want := gone && (f.name == keys.FnDurableConsumer || f.name == keys.FnDLQRepair)
			if v, ok := vars[keys.EnvPerPairClaims]; ok != want || (want && v != keys.PerPairClaimsGone) {
				t.Errorf("PerPairClaimsGone=%v: %s has %s=%v (set: %v); want set to %q: %v", gone, f.name, keys.EnvPerPairClaims, v, ok, keys.PerPairClaimsGone, want)
			}
		}
	}
}
