package twin

import (
	"encoding/xml"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"
)

// The CloudFormation API the twin answers: DescribeStacks for the one stack
// it runs, so a client reads the stack's outputs by name as against AWS
// (`fourlanes -stack`, `aws cloudformation describe-stacks` with
// AWS_ENDPOINT_URL_CLOUDFORMATION). It is the query protocol (a form POSTed
// to /, an XML answer) served beside the Lambda Invoke API, on
// CloudFormationEndpoint.

// cfnNamespace is the XML namespace of the CloudFormation API, version 2010-05-15.
const cfnNamespace = "http://cloudformation.amazonaws.com/doc/2010-05-15/"

// CloudFormationEndpoint is the base URL of the twin's CloudFormation API,
// for AWS_ENDPOINT_URL_CLOUDFORMATION. It shares the Invoke API's server.
func (tw *Twin) CloudFormationEndpoint() string { return tw.InvokeEndpoint() }

// StackName is the name of the stack the twin runs, the one its
// DescribeStacks knows.
func (tw *Twin) StackName() string { return tw.cfg.StackName }

type cfnOutput struct {
	OutputKey   string
	OutputValue string
	Description string `xml:",omitempty"`
}

type cfnStack struct {
	StackID         string `xml:"StackId"`
	StackName       string
	Description     string `xml:",omitempty"`
	CreationTime    string
	StackStatus     string
	DisableRollback bool
	Outputs         []cfnOutput `xml:"Outputs>member"`
}

type cfnDescribeStacksResponse struct {
	XMLName   xml.Name   `xml:"DescribeStacksResponse"`
	Xmlns     string     `xml:"xmlns,attr"`
	Stacks    []cfnStack `xml:"DescribeStacksResult>Stacks>member"`
	RequestID string     `xml:"ResponseMetadata>RequestId"`
}

type cfnErrorResponse struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	Type      string   `xml:"Error>Type"`
	Code      string   `xml:"Error>Code"`
	Message   string   `xml:"Error>Message"`
	RequestID string   `xml:"RequestId"`
}

// cloudFormationAPI answers DescribeStacks for the twin's stack, created at
// created. By name or by stack ID, as AWS accepts either for a running stack;
// without StackName it lists the one stack there is.
func (tw *Twin) cloudFormationAPI(created time.Time) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			cfnError(w, http.StatusBadRequest, "MalformedQueryString", err.Error())
			return
		}
		if a := r.PostForm.Get("Action"); a != "DescribeStacks" {
			cfnError(w, http.StatusBadRequest, "InvalidAction", "The action "+a+" is not valid for this web service (the twin answers DescribeStacks only).")
			return
		}
		id := tw.rv.Pseudo.StackID
		if n := r.PostForm.Get("StackName"); n != "" && n != tw.cfg.StackName && n != id {
			cfnError(w, http.StatusBadRequest, "ValidationError", "Stack with id "+n+" does not exist")
			return
		}
		st := cfnStack{StackID: id, StackName: tw.cfg.StackName, Description: tw.t.Description,
			CreationTime: created.UTC().Format("2006-01-02T15:04:05.000Z"), StackStatus: "CREATE_COMPLETE"}
		values := tw.Outputs()
		names := make([]string, 0, len(values))
		for k := range values {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			st.Outputs = append(st.Outputs, cfnOutput{OutputKey: k, OutputValue: values[k], Description: tw.t.Outputs[k].Description})
		}
		rid := uuid.NewString()
		cfnWrite(w, http.StatusOK, rid, cfnDescribeStacksResponse{Xmlns: cfnNamespace, Stacks: []cfnStack{st}, RequestID: rid})
	})
}

func cfnError(w http.ResponseWriter, status int, code, msg string) {
	rid := uuid.NewString()
	cfnWrite(w, status, rid, cfnErrorResponse{Xmlns: cfnNamespace, Type: "Sender", Code: code, Message: msg, RequestID: rid})
}

// cfnWrite writes v as the XML answer, with its request ID in the header
// too, where the SDKs read it.
func cfnWrite(w http.ResponseWriter, status int, requestID string, v any) {
	b, err := xml.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-Requestid", requestID)
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(b)
}
