package audit

import (
	"fmt"
	"io"
	"os"
)

// Values of --audit-log that are no file.
const (
	// LogStderr writes the audit log to stderr, beside the process's log
	// (each line tagged "log":"audit").
	LogStderr = "-"
	// LogNone writes no audit log.
	LogNone = "none"
)

// OpenLog opens the audit log that --audit-log names: LogStderr, LogNone
// (nil), or a file, created with mode 0600 when missing and appended to.
// Closing stderr's does nothing.
func OpenLog(path string) (io.WriteCloser, error) {
	switch path {
	case LogNone, "":
		return nil, nil
	case LogStderr:
		return nopCloser{os.Stderr}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	return f, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
