package checkpoint

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"golang.org/x/mod/sumdb/note"
)

// SigType is the C2SP signed-note signature type byte of ECDSA signatures.
const SigType = 0x02

// timePrefix starts the extension line that carries the checkpoint's time.
const timePrefix = "time "

// Sentinel errors. Verification failures wrap ErrInvalid.
var (
	// ErrInvalid: the note is not a checkpoint signed by the given key.
	ErrInvalid = errors.New("invalid checkpoint")
	// ErrBadKey: the public key is not an ECDSA P-256 key in PEM or DER
	// SubjectPublicKeyInfo form.
	ErrBadKey = errors.New("bad checkpoint public key")
)

// Checkpoint is the signed statement.
type Checkpoint struct {
	// Log names the stack that signs; it is the signature's key name and
	// the origin's prefix. No spaces, no '+'.
	Log    string
	Tenant string
	Seq    int64     // the tree size line: the last event's seq
	Hash   string    // the root hash line: that event's hash, 64 lowercase hex digits
	Time   time.Time // when it was signed (UTC, whole seconds)
}

// Origin is the note's first line: Log + "/" + Tenant.
func (c Checkpoint) Origin() string { return c.Log + "/" + c.Tenant }

// Text is the note text (the signed bytes).
func (c Checkpoint) Text() (string, error) {
	raw, err := hex.DecodeString(c.Hash)
	if err != nil || len(raw) != sha256.Size || c.Hash != strings.ToLower(c.Hash) {
		return "", fmt.Errorf("checkpoint hash %q: want 64 lowercase hex digits", c.Hash)
	}
	if !validName(c.Log) {
		return "", fmt.Errorf("checkpoint log name %q: want no spaces, no '+', not empty", c.Log)
	}
	if c.Tenant == "" || strings.ContainsFunc(c.Tenant, func(r rune) bool { return r < '!' || r > '~' }) {
		return "", fmt.Errorf("checkpoint tenant %q: want printable ASCII, no space", c.Tenant)
	}
	if c.Seq < 0 {
		return "", fmt.Errorf("checkpoint seq %d: negative", c.Seq)
	}
	return c.Origin() + "\n" + strconv.FormatInt(c.Seq, 10) + "\n" + base64.StdEncoding.EncodeToString(raw) + "\n" +
		timePrefix + c.Time.UTC().Truncate(time.Second).Format(time.RFC3339) + "\n", nil
}

// parseText reads a note text signed under log.
func parseText(log, text string) (Checkpoint, error) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != 4 || !strings.HasSuffix(text, "\n") {
		return Checkpoint{}, fmt.Errorf("%w: want 4 lines (origin, seq, hash, time), got %d", ErrInvalid, len(lines))
	}
	c := Checkpoint{Log: log}
	tenant, ok := strings.CutPrefix(lines[0], log+"/")
	if !ok || tenant == "" {
		return Checkpoint{}, fmt.Errorf("%w: origin %q is not %s/<tenant>", ErrInvalid, lines[0], log)
	}
	c.Tenant = tenant
	seq, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || seq < 0 || strconv.FormatInt(seq, 10) != lines[1] {
		return Checkpoint{}, fmt.Errorf("%w: tree size %q", ErrInvalid, lines[1])
	}
	c.Seq = seq
	raw, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(raw) != sha256.Size {
		return Checkpoint{}, fmt.Errorf("%w: root hash %q: want base64 of 32 bytes", ErrInvalid, lines[2])
	}
	c.Hash = hex.EncodeToString(raw)
	ts, ok := strings.CutPrefix(lines[3], timePrefix)
	if !ok {
		return Checkpoint{}, fmt.Errorf("%w: extension line %q: want %q and an RFC 3339 time", ErrInvalid, lines[3], timePrefix)
	}
	if c.Time, err = time.Parse(time.RFC3339, ts); err != nil {
		return Checkpoint{}, fmt.Errorf("%w: time %q: %v", ErrInvalid, ts, err)
	}
	again, err := c.Text()
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if again != text {
		return Checkpoint{}, fmt.Errorf("%w: text is not in its canonical form", ErrInvalid)
	}
	return c, nil
}

func validName(name string) bool {
	return name != "" && !strings.ContainsFunc(name, unicode.IsSpace) && !strings.Contains(name, "+")
}

// PublicKey is a verification key: an ECDSA P-256 public key and its DER
// SubjectPublicKeyInfo (the bytes KMS GetPublicKey returns).
type PublicKey struct {
	Key  *ecdsa.PublicKey
	SPKI []byte
}

// ParsePublicKey reads a PEM "PUBLIC KEY" block or DER SubjectPublicKeyInfo.
func ParsePublicKey(b []byte) (*PublicKey, error) {
	der := b
	if blk, _ := pem.Decode(b); blk != nil {
		if blk.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("%w: PEM block %q, want PUBLIC KEY", ErrBadKey, blk.Type)
		}
		der = blk.Bytes
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	ek, ok := k.(*ecdsa.PublicKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w: %T, want an ECDSA P-256 key", ErrBadKey, k)
	}
	return &PublicKey{Key: ek, SPKI: bytes.Clone(der)}, nil
}

// PEM encodes the key as a PEM PUBLIC KEY block.
func (k *PublicKey) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: k.SPKI})
}

// KeyID is the signed-note key ID of an ECDSA key (type 0x02): the first
// four bytes of SHA-256 of the DER SubjectPublicKeyInfo, big-endian.
func (k *PublicKey) KeyID() uint32 {
	sum := sha256.Sum256(k.SPKI)
	return binary.BigEndian.Uint32(sum[:4])
}

// DigestSigner signs a SHA-256 digest with the private half of a key,
// answering an ASN.1 DER ECDSA signature (KMS Sign with MessageType DIGEST
// and ECDSA_SHA_256 does exactly this).
type DigestSigner interface {
	SignDigest(ctx context.Context, digest []byte) ([]byte, error)
}

// Sign returns the signed note of c, signed by s whose public key is pub. It
// checks the signature with pub before returning it, so a signer holding
// another key fails here rather than in every later verification.
func Sign(ctx context.Context, c Checkpoint, pub *PublicKey, s DigestSigner) ([]byte, error) {
	text, err := c.Text()
	if err != nil {
		return nil, err
	}
	ns := &noteSigner{ctx: ctx, name: c.Log, pub: pub, s: s}
	msg, err := note.Sign(&note.Note{Text: text}, ns)
	if err != nil {
		return nil, fmt.Errorf("sign checkpoint: %w", err)
	}
	if ns.err != nil {
		return nil, fmt.Errorf("sign checkpoint: %w", ns.err)
	}
	if _, err := Open(msg, c.Log, pub); err != nil {
		return nil, fmt.Errorf("sign checkpoint: the signer's key is not the public key given: %w", err)
	}
	return msg, nil
}

// Open verifies a signed note against the key named log with public key pub
// and returns the checkpoint it states. Any failure wraps ErrInvalid.
func Open(msg []byte, log string, pub *PublicKey) (Checkpoint, error) {
	n, err := note.Open(msg, note.VerifierList(&noteVerifier{name: log, pub: pub}))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return parseText(log, n.Text)
}

// LogOf returns the key name of the note's first signature line, unverified:
// for a verifier that holds only the public key and must learn which stack's
// name it signed under. Open then binds name, key and text together.
func LogOf(msg []byte) (string, error) {
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 {
		return "", fmt.Errorf("%w: no signature block", ErrInvalid)
	}
	line, _, _ := strings.Cut(string(msg[i+2:]), "\n")
	rest, ok := strings.CutPrefix(line, "— ")
	if !ok {
		return "", fmt.Errorf("%w: signature line %q", ErrInvalid, line)
	}
	name, _, ok := strings.Cut(rest, " ")
	if !ok || !validName(name) {
		return "", fmt.Errorf("%w: signature line %q", ErrInvalid, line)
	}
	return name, nil
}

type noteSigner struct {
	ctx  context.Context
	name string
	pub  *PublicKey
	s    DigestSigner
	err  error
}

func (n *noteSigner) Name() string    { return n.name }
func (n *noteSigner) KeyHash() uint32 { return n.pub.KeyID() }
func (n *noteSigner) Sign(msg []byte) ([]byte, error) {
	d := sha256.Sum256(msg)
	sig, err := n.s.SignDigest(n.ctx, d[:])
	if err != nil {
		n.err = err // note.Sign flattens errors; keep the cause
	}
	return sig, err
}

type noteVerifier struct {
	name string
	pub  *PublicKey
}

func (v *noteVerifier) Name() string    { return v.name }
func (v *noteVerifier) KeyHash() uint32 { return v.pub.KeyID() }
func (v *noteVerifier) Verify(msg, sig []byte) bool {
	d := sha256.Sum256(msg)
	return ecdsa.VerifyASN1(v.pub.Key, d[:], sig)
}

// LocalSigner signs with an in-process private key: tests and the offline
// known-answer vectors, never the stack (its key stays in KMS).
type LocalSigner struct{ Key *ecdsa.PrivateKey }

// SignDigest answers DigestSigner.
func (l LocalSigner) SignDigest(_ context.Context, digest []byte) ([]byte, error) {
	return ecdsa.SignASN1(rand.Reader, l.Key, digest)
}

// Public returns the signer's public key.
func (l LocalSigner) Public() *PublicKey {
	der, err := x509.MarshalPKIXPublicKey(&l.Key.PublicKey)
	if err != nil {
		panic(err) // a P-256 key always marshals
	}
	return &PublicKey{Key: &l.Key.PublicKey, SPKI: der}
}
