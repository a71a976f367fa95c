// Command notary reads the events stream and alone signs checkpoints of
// what it saw appended (serve.Notary; it needs no application).
package main

import "github.com/fourlanes/fourlanes/pkg/serve"

func main() { serve.Notary() }
