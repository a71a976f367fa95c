// Command tamper-watch is the relay's next release of its tamper-watch function.
package main

import "github.com/fourlanes/fourlanes/pkg/serve"

func main() { serve.TamperWatch() }
