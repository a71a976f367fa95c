// Command tamper-watch is the library's tamper-watch function
// (serve.TamperWatch; it needs no application).
package main

import "github.com/fourlanes/fourlanes/pkg/serve"

func main() { serve.TamperWatch() }
