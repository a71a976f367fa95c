package twin

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// KMS is the twin's KMS: a subset of the AWS KMS JSON protocol
// (X-Amz-Target TrentService.*, application/x-amz-json-1.1) for
// asymmetric ECC_NIST_P256 SIGN_VERIFY keys (CreateKey, DescribeKey,
// GetPublicKey, Sign and Verify: ECDSA_SHA_256, MessageType RAW or DIGEST)
// and SYMMETRIC_DEFAULT ENCRYPT_DECRYPT keys (CreateKey, DescribeKey,
// Encrypt, Decrypt, GenerateDataKey), whose ciphertext blobs name their key
// and are bound to the request's EncryptionContext, as KMS's are.
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
	priv    *ecdsa.PrivateKey // SIGN_VERIFY
	secret  []byte            // ENCRYPT_DECRYPT: a 256-bit AES key
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

// CreateSymmetricKey creates a SYMMETRIC_DEFAULT ENCRYPT_DECRYPT key and
// returns its key ID and ARN.
func (k *KMS) CreateSymmetricKey() (id, arn string, err error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", "", err
	}
	id = uuid.NewString()
	arn = arnOf("kms", "key/"+id)
	k.mu.Lock()
	k.keys[id] = &kmsKey{id: id, arn: arn, secret: secret}
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
	var in kmsRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil && len(body) > 0 {
		err = json.Unmarshal(body, &in)
	}
	var out any
	var kerr *kmsError
	if err != nil {
		kerr = &kmsError{400, "SerializationException", err.Error()}
	} else {
		out, kerr = k.do(op, in)
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if kerr != nil {
		w.WriteHeader(kerr.status)
		json.NewEncoder(w).Encode(map[string]string{"__type": kerr.typ, "message": kerr.msg})
		return
	}
	json.NewEncoder(w).Encode(out)
}

// kmsRequest holds the members of the requests the twin's KMS serves.
type kmsRequest struct {
	KeyId, KeySpec, KeyUsage, MessageType, SigningAlgorithm string
	Message, Signature, Plaintext, CiphertextBlob           []byte // base64 in JSON, as KMS's blobs
	EncryptionContext                                       map[string]string
	NumberOfBytes                                           int
}

func (k *KMS) do(op string, in kmsRequest) (any, *kmsError) {
	keyID, msgType, alg, msg, sig := in.KeyId, in.MessageType, in.SigningAlgorithm, in.Message, in.Signature
	if op == "CreateKey" {
		var id string
		var err error
		switch {
		case in.KeySpec == "ECC_NIST_P256" && in.KeyUsage == "SIGN_VERIFY":
			id, _, err = k.CreateSigningKey()
		case (in.KeySpec == "" || in.KeySpec == "SYMMETRIC_DEFAULT") && (in.KeyUsage == "" || in.KeyUsage == "ENCRYPT_DECRYPT"):
			id, _, err = k.CreateSymmetricKey()
		default:
			return nil, &kmsError{400, "UnsupportedOperationException", fmt.Sprintf("the twin's KMS makes ECC_NIST_P256 SIGN_VERIFY and SYMMETRIC_DEFAULT ENCRYPT_DECRYPT keys only, not %s %s", in.KeySpec, in.KeyUsage)}
		}
		if err != nil {
			return nil, &kmsError{500, "KMSInternalException", err.Error()}
		}
		return map[string]any{"KeyMetadata": k.metadata(k.key(id))}, nil
	}
	if op == "Decrypt" && keyID == "" {
		// A symmetric ciphertext blob names its key, as KMS's do.
		keyID, _, _ = splitBlob(in.CiphertextBlob)
	}
	key := k.key(keyID)
	if key == nil {
		return nil, &kmsError{400, "NotFoundException", fmt.Sprintf("Key '%s' does not exist", keyID)}
	}
	switch op {
	case "Encrypt", "Decrypt", "GenerateDataKey":
		return k.symmetric(op, key, in)
	}
	if key.priv == nil && op != "DescribeKey" {
		return nil, &kmsError{400, "InvalidKeyUsageException", fmt.Sprintf("key %s is an ENCRYPT_DECRYPT key: %s needs a SIGN_VERIFY key", key.id, op)}
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
	if key.secret != nil {
		return map[string]any{"KeyId": key.id, "Arn": key.arn, "AWSAccountId": localaws.AccountID, "Enabled": true,
			"KeyState": "Enabled", "KeySpec": "SYMMETRIC_DEFAULT", "CustomerMasterKeySpec": "SYMMETRIC_DEFAULT",
			"KeyUsage": "ENCRYPT_DECRYPT", "KeyManager": "CUSTOMER", "Origin": "AWS_KMS", "EncryptionAlgorithms": []string{"SYMMETRIC_DEFAULT"}}
	}
	return map[string]any{"KeyId": key.id, "Arn": key.arn, "AWSAccountId": localaws.AccountID, "Enabled": true,
		"KeyState": "Enabled", "KeySpec": "ECC_NIST_P256", "CustomerMasterKeySpec": "ECC_NIST_P256",
		"KeyUsage": "SIGN_VERIFY", "KeyManager": "CUSTOMER", "Origin": "AWS_KMS", "SigningAlgorithms": []string{"ECDSA_SHA_256"}}
}

// symmetric serves Encrypt, Decrypt and GenerateDataKey on an
// ENCRYPT_DECRYPT key. A blob is: the key ID's length (one byte), the key
// ID, a 12-byte nonce, and AES-256-GCM of the plaintext with the encryption
// context (sorted name=value pairs) as additional data.
func (k *KMS) symmetric(op string, key *kmsKey, in kmsRequest) (any, *kmsError) {
	if key.secret == nil {
		return nil, &kmsError{400, "InvalidKeyUsageException", fmt.Sprintf("key %s is a SIGN_VERIFY key: %s needs an ENCRYPT_DECRYPT key", key.id, op)}
	}
	gcm, err := newKMSGCM(key.secret)
	if err != nil {
		return nil, &kmsError{500, "KMSInternalException", err.Error()}
	}
	aad := contextBytes(in.EncryptionContext)
	encrypt := func(plain []byte) ([]byte, error) {
		nonce := make([]byte, gcm.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return nil, err
		}
		blob := append([]byte{byte(len(key.id))}, key.id...)
		blob = append(blob, nonce...)
		return gcm.Seal(blob, nonce, plain, aad), nil
	}
	switch op {
	case "Encrypt":
		if len(in.Plaintext) == 0 || len(in.Plaintext) > 4096 {
			return nil, &kmsError{400, "ValidationException", "Plaintext must be 1 to 4096 bytes"}
		}
		blob, err := encrypt(in.Plaintext)
		if err != nil {
			return nil, &kmsError{500, "KMSInternalException", err.Error()}
		}
		return map[string]any{"KeyId": key.arn, "CiphertextBlob": blob, "EncryptionAlgorithm": "SYMMETRIC_DEFAULT"}, nil
	case "GenerateDataKey":
		n := in.NumberOfBytes
		switch {
		case in.KeySpec == "AES_256" && n == 0:
			n = 32
		case in.KeySpec == "AES_128" && n == 0:
			n = 16
		case in.KeySpec != "" && n != 0, in.KeySpec == "" && (n < 1 || n > 1024):
			return nil, &kmsError{400, "ValidationException", "give KeySpec (AES_128 or AES_256) or NumberOfBytes (1 to 1024), not both"}
		case in.KeySpec != "" && in.KeySpec != "AES_256" && in.KeySpec != "AES_128":
			return nil, &kmsError{400, "ValidationException", fmt.Sprintf("KeySpec %q", in.KeySpec)}
		}
		plain := make([]byte, n)
		if _, err := rand.Read(plain); err != nil {
			return nil, &kmsError{500, "KMSInternalException", err.Error()}
		}
		blob, err := encrypt(plain)
		if err != nil {
			return nil, &kmsError{500, "KMSInternalException", err.Error()}
		}
		return map[string]any{"KeyId": key.arn, "CiphertextBlob": blob, "Plaintext": plain}, nil
	default: // Decrypt
		id, nonce, ct := splitBlob(in.CiphertextBlob)
		if id != key.id || len(nonce) != gcm.NonceSize() {
			return nil, &kmsError{400, "IncorrectKeyException", "The key ID in the request does not identify a CMK that can perform this operation."}
		}
		plain, err := gcm.Open(nil, nonce, ct, aad)
		if err != nil {
			return nil, &kmsError{400, "InvalidCiphertextException", ""}
		}
		return map[string]any{"KeyId": key.arn, "Plaintext": plain, "EncryptionAlgorithm": "SYMMETRIC_DEFAULT"}, nil
	}
}

func splitBlob(blob []byte) (id string, nonce, ct []byte) {
	if len(blob) < 1 || len(blob) < 1+int(blob[0])+12 {
		return "", nil, nil
	}
	n := int(blob[0])
	return string(blob[1 : 1+n]), blob[1+n : 1+n+12], blob[1+n+12:]
}

func contextBytes(ec map[string]string) []byte {
	names := make([]string, 0, len(ec))
	for n := range ec {
		names = append(names, n)
	}
	sort.Strings(names)
	var b []byte
	for _, n := range names {
		b = append(b, n...)
		b = append(b, '=')
		b = append(b, ec[n]...)
		b = append(b, 0)
	}
	return b
}

func newKMSGCM(secret []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(secret)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
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
	var id, arn string
	switch {
	case spec == "ECC_NIST_P256" && usage == "SIGN_VERIFY":
		id, arn, err = tw.KMS().CreateSigningKey()
	case (spec == nil || spec == "SYMMETRIC_DEFAULT") && (usage == nil || usage == "ENCRYPT_DECRYPT"):
		id, arn, err = tw.KMS().CreateSymmetricKey()
	default:
		return nil, fmt.Errorf("the twin's KMS makes ECC_NIST_P256 SIGN_VERIFY and SYMMETRIC_DEFAULT ENCRYPT_DECRYPT keys only, not %v %v", spec, usage)
	}
	if err != nil {
		return nil, err
	}
	tw.log.Info("twin: KMS key", obs.KeyLogicalID, res.LogicalID, obs.KeyKeyID, id)
	return &resource{id: res.LogicalID, typ: res.Type, ref: id, attrs: map[string]any{"Arn": arn, "KeyId": id}}, nil
}
