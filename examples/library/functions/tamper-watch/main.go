// Command tamper-watch is the library's tamper-watch function
// (tamperwatch.Run; it needs no application).
package main

import "github.com/fourlanes/fourlanes/pkg/serve/tamperwatch"

func main() { tamperwatch.Run() }
