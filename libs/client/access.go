package client

import (
	"context"
	"net/http"
)

const accessReviewPath = "/api/v1/access-review"

// AccessReview asks whether the caller may do Verb on objects of Type (a
// resource type's name, a global kind such as resource-types or tokens,
// or *), in Namespace ("" for a global object or every namespace) and of
// Name ("" for any).
type AccessReview struct {
	Verb      string `json:"verb"`
	Type      string `json:"type"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
}

// AccessReviewResult is the answer to an AccessReview.
type AccessReviewResult struct {
	AccessReview
	Allowed bool `json:"allowed"`
	// Reason says why not, when not allowed.
	Reason string `json:"reason,omitempty"`
}

// CanI asks the server whether the caller may make the request of r.
func (c *Client) CanI(ctx context.Context, r AccessReview) (*AccessReviewResult, error) {
	var out AccessReviewResult
	if _, err := c.do(ctx, request{method: http.MethodPost, path: accessReviewPath, body: r}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
