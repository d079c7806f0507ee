package composerun

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func signalNotify(c chan os.Signal) { signal.Notify(c, os.Interrupt, syscall.SIGTERM) }
func signalStop(c chan os.Signal)   { signal.Stop(c) }

// contextBackground is the root context of a program that runs the check
// on its own (the interrupted child of the cleanup test).
func contextBackground() context.Context { return context.Background() }
