// Command tamper-watch reports every change to the insert-only log
// (serve.TamperWatch; it needs no application).
package main

import "github.com/fourlanes/fourlanes/pkg/serve"

func main() { serve.TamperWatch() }
