// Command heartbeat is the library's heartbeat writer
// (heartbeat.Run; it needs no application).
package main

import "github.com/fourlanes/fourlanes/pkg/serve/heartbeat"

func main() { heartbeat.Run() }
