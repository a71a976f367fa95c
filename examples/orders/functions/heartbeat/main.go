// Command heartbeat writes the stack's heartbeat on its schedule
// (heartbeat.Run; it needs no application).
package main

import "github.com/fourlanes/fourlanes/pkg/serve/heartbeat"

func main() { heartbeat.Run() }
