package app

import "github.com/fourlanes/fourlanes/pkg/heartbeat"

// builtin is the framework's own module, which every application carries
// after its own: the heartbeat's event type and its DURABLE subscriber
// (pkg/heartbeat). It reads no environment and emits nothing from its
// handler.
var builtin = Module{
	Spec: heartbeat.Module.Spec(),
	Bind: func(rt Runtime) (Bound, error) {
		return Bound{Binding: heartbeat.Module.Bind(&heartbeat.Monitor{Logger: rt.Logger, Metrics: rt.Metrics})}, nil
	},
}

// modules returns the application's modules followed by the framework's.
func (a Application) modules() []Module {
	return append(append(make([]Module, 0, len(a.Modules)+1), a.Modules...), builtin)
}
