// Package checkpoint signs and verifies fourlanes checkpoints: the statement
// "tenant T's chain had event seq N with hash H at time W", as a C2SP signed
// note (c2sp.org/signed-note) whose text is a C2SP tlog checkpoint
// (c2sp.org/tlog-checkpoint) with one extension line for the time. The
// signature is ECDSA P-256 over SHA-256 (signed-note signature type 0x02,
// key ID = SHA-256(DER SubjectPublicKeyInfo)[:4]), the form an AWS KMS key
// of spec ECC_NIST_P256 makes with ECDSA_SHA_256, so the private key never
// leaves KMS and anyone with the public key verifies offline.
//
// The note encoding is golang.org/x/mod/sumdb/note's (Sign, Open); this
// package supplies its ECDSA Signer and Verifier, which that package allows
// (it implements only Ed25519 itself). pkg/chain/SPEC.md §9 is the format.
package checkpoint
