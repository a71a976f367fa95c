// Package erasure keeps personal data erasable in an insert-only log, by
// crypto-shredding.
//
// A payload type marks its personal fields and its data subject with struct
// tags (catalog's `fourlanes:"personal"` and `fourlanes:"subject"`). A Vault
// seals each personal field under the subject's own 256-bit data key before
// the event is hashed and written, so the log stores, and the chain covers,
// only ciphertext. The data key is made by KMS (GenerateDataKey, with the
// tenant and subject as encryption context) and kept wrapped in the
// subject-keys table; Erase replaces it with a tombstone. From then on no
// one can open the subject's fields, the events still verify offline (their
// bytes never change), and readers see catalog.Erased.
//
// The sealed form is specified in pkg/chain/SPEC.md ("Personal fields"):
// "fl:pii:1:" followed by the unpadded base64url of a 12-byte nonce and the
// AES-256-GCM ciphertext and tag, the additional data binding it to its
// tenant, subject, event type and field. The nonce is synthetic (an HMAC of
// the additional data and the plaintext under the data key), so sealing the
// same value twice gives the same bytes: a retried Emit with an idempotency
// key still matches its first attempt. It also means two equal values of one
// subject's field are seen to be equal; nothing more is learnt.
//
// A Vault caches unwrapped data keys for CacheTTL (a minute by default): a
// function that read a subject's key before the erasure may still open its
// fields for up to that long, and a sealing emitter may still seal new
// values under it, which are then as unreadable as the rest.
package erasure
