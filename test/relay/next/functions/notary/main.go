// Command notary is the relay's notary function.
package main

import "github.com/fourlanes/fourlanes/pkg/serve/notary"

func main() { notary.Run() }
