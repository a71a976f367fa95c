package twin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// KMS is the twin's KMS: the signing subset of the AWS KMS JSON protocol
// (X-Amz-Target TrentService.*, application/x-amz-json-1.1) for
// asymmetric ECC_NIST_P256 SIGN_VERIFY keys: CreateKey, DescribeKey,
// GetPublicKey, Sign and Verify (ECDSA_SHA_256, MessageType RAW or DIGEST).
// The private keys stay in this process, as in KMS they stay in KMS.
//
// Why not nsmithuk/local-kms: it is a standalone server (package main over
// its own handlers and a LevelDB store), not a library this process can
// start on a loopback port, and it would bring a second binary to build and
// run for five operations; these answer with the shapes the AWS SDK reads.
type KMS struct {
	mu   sync.Mutex
	keys map[string]*kmsKey // by key ID
}

type kmsKey struct {
	id, arn string
	priv    *ecdsa.PrivateKey
}

// NewKMS returns an empty KMS.
func NewKMS() *KMS { return &KMS{keys: map[string]*kmsKey{}} }

// CreateSigningKey creates an ECC_NIST_P256 SIGN_VERIFY key and returns its
// key ID and ARN.
func (k *KMS) CreateSigningKey() (id, arn string, err error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	id = uuid.NewString()
	arn = arnOf("kms", "key/"+id)
	k.mu.Lock()
	k.keys[id] = &kmsKey{id: id, arn: arn, priv: priv}
	k.mu.Unlock()
	return id, arn, nil
}

func (k *KMS) key(ref string) *kmsKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	if i := strings.LastIndex(ref, ":key/"); i >= 0 {
		ref = ref[i+len(":key/"):]
	}
	return k.keys[ref]
}

type kmsError struct {
	status int
	typ    string
	msg    string
}

// ServeHTTP answers one KMS JSON request.
func (k *KMS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "TrentService.")
	var in struct {
		KeyId, KeySpec, KeyUsage, MessageType, SigningAlgorithm string
		Message, Signature                                      []byte // base64 in JSON, as KMS's blobs
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil && len(body) > 0 {
		err = json.Unmarshal(body, &in)
	}
	var out any
	var kerr *kmsError
	if err != nil {
		kerr = &kmsError{400, "SerializationException", err.Error()}
	} else {
		out, kerr = k.do(op, in.KeyId, in.KeySpec, in.KeyUsage, in.MessageType, in.SigningAlgorithm, in.Message, in.Signature)
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if kerr != nil {
		w.WriteHeader(kerr.status)
		json.NewEncoder(w).Encode(map[string]string{"__type": kerr.typ, "message": kerr.msg})
		return
	}
	json.NewEncoder(w).Encode(out)
}

func (k *KMS) do(op, keyID, spec, usage, msgType, alg string, msg, sig []byte) (any, *kmsError) {
	if op == "CreateKey" {
		if spec != "ECC_NIST_P256" || usage != "SIGN_VERIFY" {
			return nil, &kmsError{400, "UnsupportedOperationException", fmt.Sprintf("the twin's KMS makes ECC_NIST_P256 SIGN_VERIFY keys only, not %s %s", spec, usage)}
		}
		id, _, err := k.CreateSigningKey()
		if err != nil {
			return nil, &kmsError{500, "KMSInternalException", err.Error()}
		}
		return map[string]any{"KeyMetadata": k.metadata(k.key(id))}, nil
	}
	key := k.key(keyID)
	if key == nil {
		return nil, &kmsError{400, "NotFoundException", fmt.Sprintf("Key '%s' does not exist", keyID)}
	}
	switch op {
	case "DescribeKey":
		return map[string]any{"KeyMetadata": k.metadata(key)}, nil
	case "GetPublicKey":
		der, err := x509.MarshalPKIXPublicKey(&key.priv.PublicKey)
		if err != nil {
			return nil, &kmsError{500, "KMSInternalException", err.Error()}
		}
		return map[string]any{"KeyId": key.arn, "PublicKey": der, "KeySpec": "ECC_NIST_P256", "KeyUsage": "SIGN_VERIFY",
			"SigningAlgorithms": []string{"ECDSA_SHA_256"}}, nil
	case "Sign", "Verify":
		if alg != "ECDSA_SHA_256" {
			return nil, &kmsError{400, "InvalidKeyUsageException", fmt.Sprintf("signing algorithm %q: this key supports ECDSA_SHA_256", alg)}
		}
		var digest []byte
		switch msgType {
		case "", "RAW":
			if len(msg) == 0 || len(msg) > 4096 {
				return nil, &kmsError{400, "ValidationException", "Message must be 1 to 4096 bytes"}
			}
			d := sha256.Sum256(msg)
			digest = d[:]
		case "DIGEST":
			if len(msg) != sha256.Size {
				return nil, &kmsError{400, "ValidationException", "Digest is invalid length for algorithm ECDSA_SHA_256."}
			}
			digest = msg
		default:
			return nil, &kmsError{400, "ValidationException", fmt.Sprintf("MessageType %q", msgType)}
		}
		if op == "Verify" {
			if !ecdsa.VerifyASN1(&key.priv.PublicKey, digest, sig) {
				return nil, &kmsError{400, "KMSInvalidSignatureException", ""}
			}
			return map[string]any{"KeyId": key.arn, "SignatureValid": true, "SigningAlgorithm": alg}, nil
		}
		s, err := ecdsa.SignASN1(rand.Reader, key.priv, digest)
		if err != nil {
			return nil, &kmsError{500, "KMSInternalException", err.Error()}
		}
		return map[string]any{"KeyId": key.arn, "Signature": s, "SigningAlgorithm": alg}, nil
	}
	return nil, &kmsError{400, "UnknownOperationException", "the twin's KMS does not serve " + op}
}

func (k *KMS) metadata(key *kmsKey) map[string]any {
	return map[string]any{"KeyId": key.id, "Arn": key.arn, "AWSAccountId": localaws.AccountID, "Enabled": true,
		"KeyState": "Enabled", "KeySpec": "ECC_NIST_P256", "CustomerMasterKeySpec": "ECC_NIST_P256",
		"KeyUsage": "SIGN_VERIFY", "KeyManager": "CUSTOMER", "Origin": "AWS_KMS", "SigningAlgorithms": []string{"ECDSA_SHA_256"}}
}

// serve starts h, the endpoint what, on the loopback port (0: a free one)
// and returns its endpoint URL; Close stops it.
func (tw *Twin) serve(what string, port int, h http.Handler) (string, error) {
	ln, err := listen(what, port)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	tw.closers = append(tw.closers, func() { srv.Shutdown(context.Background()) })
	return "http://" + ln.Addr().String(), nil
}

// KMSEndpoint is the twin's KMS, started on first use; functions get it as
// AWS_ENDPOINT_URL_KMS.
func (tw *Twin) KMSEndpoint() string {
	tw.startLocalAWS()
	return tw.local.kmsURL
}

// KMS returns the twin's KMS server.
func (tw *Twin) KMS() *KMS {
	tw.startLocalAWS()
	return tw.local.kms
}

// createKey creates an AWS::KMS::Key (KeySpec ECC_NIST_P256, KeyUsage
// SIGN_VERIFY; the key policy is AWS-side only). Ref: key ID. GetAtt: Arn,
// KeyId.
func (tw *Twin) createKey(_ context.Context, res *cfn.Resource) (*resource, error) {
	spec, _, err := tw.rv.Prop(res, "KeySpec")
	if err != nil {
		return nil, err
	}
	usage, _, err := tw.rv.Prop(res, "KeyUsage")
	if err != nil {
		return nil, err
	}
	if spec != "ECC_NIST_P256" || usage != "SIGN_VERIFY" {
		return nil, fmt.Errorf("the twin's KMS makes ECC_NIST_P256 SIGN_VERIFY keys only, not %v %v", spec, usage)
	}
	id, arn, err := tw.KMS().CreateSigningKey()
	if err != nil {
		return nil, err
	}
	tw.log.Info("twin: KMS key", "logical_id", res.LogicalID, "key_id", id)
	return &resource{id: res.LogicalID, typ: res.Type, ref: id, attrs: map[string]any{"Arn": arn, "KeyId": id}}, nil
}
