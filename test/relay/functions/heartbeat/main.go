// Command heartbeat is the relay's heartbeat writer.
package main

import "github.com/fourlanes/fourlanes/pkg/serve"

func main() { serve.Heartbeat() }
