// Command tamper-watch reports every change to the insert-only log
// (tamperwatch.Run; it needs no application).
package main

import "github.com/fourlanes/fourlanes/pkg/serve/tamperwatch"

func main() { tamperwatch.Run() }
