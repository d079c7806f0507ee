package testkit

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	apiclient "github.com/no8s/no8s/libs/client"
)

// useToken reads the control plane's administrator token and makes e.HTTP
// send it to the API.
func (e *Env) useToken(path string) error {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("the administrator's token: %w", err)
	}
	e.Token = strings.TrimSpace(string(b))
	api, err := url.Parse(e.URL)
	if err != nil {
		return fmt.Errorf("api url: %w", err)
	}
	e.HTTP.Transport = apiclient.BearerTransport(e.HTTP.Transport, e.Token, api.Host)
	return nil
}
