// Command notary reads the events stream and alone signs checkpoints of
// what it saw appended (notary.Run; it needs no application).
package main

import "github.com/fourlanes/fourlanes/pkg/serve/notary"

func main() { notary.Run() }
