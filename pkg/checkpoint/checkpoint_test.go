package checkpoint_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/checkpoint"
)

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testKey(t *testing.T) checkpoint.LocalSigner {
	t.Helper()
	blk, _ := pem.Decode(readFile(t, "test-key.pem"))
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return checkpoint.LocalSigner{Key: k.(*ecdsa.PrivateKey)}
}

func vector(t *testing.T) checkpoint.Checkpoint {
	return checkpoint.Checkpoint{Log: "fourlanes/demo", Tenant: "acme", Seq: 42,
		Hash: strings.TrimSpace(string(readFile(t, "vector.hash"))), Time: time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)}
}

// The text, key ID and signature of the OpenSSL-made vector (testdata/README.md).
func TestKnownAnswer(t *testing.T) {
	pub, err := checkpoint.ParsePublicKey(readFile(t, "test-key.pub.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pub.KeyID(), uint32(0x03704bc7); got != want {
		t.Errorf("KeyID = %08x, want %08x", got, want)
	}
	text, err := vector(t).Text()
	if err != nil {
		t.Fatal(err)
	}
	if want := string(readFile(t, "vector.txt")); text != want {
		t.Errorf("Text =\n%s\nwant\n%s", text, want)
	}
	got, err := checkpoint.Open(readFile(t, "vector.note"), "fourlanes/demo", pub)
	if err != nil {
		t.Fatalf("Open(vector.note): %v", err)
	}
	if got != vector(t) {
		t.Errorf("Open = %+v, want %+v", got, vector(t))
	}
	if log, err := checkpoint.LogOf(readFile(t, "vector.note")); err != nil || log != "fourlanes/demo" {
		t.Errorf("LogOf = %q, %v; want fourlanes/demo", log, err)
	}
	// The DER form of the same key reads the same.
	der, _ := pem.Decode(readFile(t, "test-key.pub.pem"))
	pub2, err := checkpoint.ParsePublicKey(der.Bytes)
	if err != nil || !bytes.Equal(pub2.SPKI, pub.SPKI) {
		t.Errorf("ParsePublicKey(DER) = %v, %v", pub2, err)
	}
}

func TestSignOpenRoundTrip(t *testing.T) {
	s := testKey(t)
	msg, err := checkpoint.Sign(context.Background(), vector(t), s.Public(), s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := checkpoint.Open(msg, "fourlanes/demo", s.Public())
	if err != nil || got != vector(t) {
		t.Fatalf("Open(Sign(v)) = %+v, %v; want %+v", got, err, vector(t))
	}
}

func TestRefused(t *testing.T) {
	s := testKey(t)
	good := readFile(t, "vector.note")
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherPub := checkpoint.LocalSigner{Key: other}.Public()
	// A note whose text and key name are right, signed by another key.
	forged, err := checkpoint.Sign(context.Background(), vector(t), otherPub, checkpoint.LocalSigner{Key: other})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		msg  []byte
		log  string
		pub  *checkpoint.PublicKey
	}{
		{"seq raised", bytes.Replace(good, []byte("\n42\n"), []byte("\n43\n"), 1), "fourlanes/demo", s.Public()},
		{"hash changed", bytes.Replace(good, []byte("kbNT"), []byte("kbNU"), 1), "fourlanes/demo", s.Public()},
		{"tenant changed", bytes.Replace(good, []byte("demo/acme"), []byte("demo/acmf"), 1), "fourlanes/demo", s.Public()},
		{"time changed", bytes.Replace(good, []byte("23:00:00Z"), []byte("23:00:01Z"), 1), "fourlanes/demo", s.Public()},
		{"wrong key", good, "fourlanes/demo", otherPub},
		{"wrong log name", good, "fourlanes/prod", s.Public()},
		{"signed by another key", forged, "fourlanes/demo", s.Public()},
		{"no signature", readFile(t, "vector.txt"), "fourlanes/demo", s.Public()},
		{"signature cut", good[:len(good)-10], "fourlanes/demo", s.Public()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := checkpoint.Open(c.msg, c.log, c.pub)
			if !errors.Is(err, checkpoint.ErrInvalid) {
				t.Fatalf("Open = %+v, %v; want ErrInvalid", got, err)
			}
		})
	}
}

// A signer whose key is not the public key given fails at Sign.
func TestSignWrongKey(t *testing.T) {
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if _, err := checkpoint.Sign(context.Background(), vector(t), testKey(t).Public(), checkpoint.LocalSigner{Key: other}); err == nil {
		t.Fatal("Sign with a mismatched signer: no error")
	}
}

func TestTextRefusesBadFields(t *testing.T) {
	for name, mut := range map[string]func(*checkpoint.Checkpoint){
		"hash upper":     func(c *checkpoint.Checkpoint) { c.Hash = strings.ToUpper(c.Hash) },
		"hash short":     func(c *checkpoint.Checkpoint) { c.Hash = c.Hash[:62] },
		"log plus":       func(c *checkpoint.Checkpoint) { c.Log = "a+b" },
		"tenant space":   func(c *checkpoint.Checkpoint) { c.Tenant = "a b" },
		"negative seq":   func(c *checkpoint.Checkpoint) { c.Seq = -1 },
		"tenant newline": func(c *checkpoint.Checkpoint) { c.Tenant = "a\nb" },
	} {
		c := vector(t)
		mut(&c)
		if _, err := c.Text(); err == nil {
			t.Errorf("%s: Text() accepted %+v", name, c)
		}
	}
}
