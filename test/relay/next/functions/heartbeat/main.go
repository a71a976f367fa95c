// Command heartbeat is the relay's next release of its heartbeat writer.
package main

import "github.com/fourlanes/fourlanes/pkg/serve"

func main() { serve.Heartbeat() }
