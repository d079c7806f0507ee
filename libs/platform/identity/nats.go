package identity

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
)

// NATSCredsFile is a credentials directory's NATS user: its JWT, whose
// permissions are the identity's, and its nkey private key (the format of
// `nats --creds`). Issued beside the certificate when the installation's CA
// has NATS keys; a directory without it connects to NATS without
// authentication.
const NATSCredsFile = "nats.creds"

// NATSInboxPrefix is the prefix of the reply subjects id's NATS connections
// use. Its NATS permissions let id read replies under it and no one else's.
// Publishers and readers use NATS's default, _INBOX.
func NATSInboxPrefix(id ID) string {
	if id.Kind.NATSOnly() {
		return nats.InboxPrefix[:len(nats.InboxPrefix)-1]
	}
	return "_NO8S_INBOX." + string(id.Kind) + "." + id.Name
}

// NATSOptions are the options that connect to NATS as the credentials'
// identity: its NATS user file, read again at every connection so that a
// renewed one takes effect on the next reconnect, and its inbox prefix.
// Without a NATSCredsFile in the directory there are none.
func (c *Credentials) NATSOptions() ([]nats.Option, error) {
	path := filepath.Join(c.dir, NATSCredsFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	return []nats.Option{nats.UserCredentials(path), nats.CustomInboxPrefix(NATSInboxPrefix(c.ID()))}, nil
}

// ExplainNATSError adds to err, a NATS connection's failure, what it means
// for a connection with a NATS user: a server that checks no users (not
// configured with `no8s identity nats-config`) takes a user JWT as a
// protocol line longer than its limit.
func ExplainNATSError(err error) error {
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "maximum control line") {
		return fmt.Errorf("%w (this process connects with the NATS user of its credentials, %s: is the NATS server configured to check users, with `no8s identity nats-config`? A CA without NATS keys issues no NATS users)", err, NATSCredsFile)
	}
	return err
}
