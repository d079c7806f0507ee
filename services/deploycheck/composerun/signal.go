package composerun

import (
	"os"
	"os/signal"
	"syscall"
)

func signalNotify(c chan os.Signal) { signal.Notify(c, os.Interrupt, syscall.SIGTERM) }
func signalStop(c chan os.Signal)   { signal.Stop(c) }
