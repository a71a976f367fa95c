// Command tamper-watch reports deletes of the state table's protected rows
// (tamperwatch.Run; it needs no application).
package main

import "github.com/fourlanes/fourlanes/pkg/serve/tamperwatch"

func main() { tamperwatch.Run() }
