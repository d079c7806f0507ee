package main

// bench_auth.go is the "api-auth" scenario: API creates/s through a gateway
// that authenticates each request with an API token, and through one that
// verifies an RS256 OIDC JWT, against one with --auth=none, on the same
// store and admission, measured back to back in alternating rounds.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/services/internal/authn/oidc/oidctest"
)

// authRounds is how many alternating rounds the scenario measures; each
// arm's figure is its median.
const authRounds = 3

// authArm is one way of calling the API.
type authArm struct {
	name          string
	url           string
	authorization string
	rates         []float64
}

// benchAPIAuth is the "api-auth" scenario.
func benchAPIAuth(ctx context.Context, env *benchEnv) error {
	if err := env.Fresh(ctx); err != nil {
		return err
	}
	if err := createAuthBenchType(ctx, env); err != nil {
		return err
	}
	issuer, err := oidctest.Start()
	if err != nil {
		return err
	}
	defer issuer.Close()
	const audience = "no8s-bench"
	openURL, err := env.startGateway(ctx, "gateway-open", "--auth=none")
	if err != nil {
		return err
	}
	jwtURL, err := env.startGateway(ctx, "gateway-jwt", "--oidc-issuer", "issuer="+issuer.URL()+",audience="+audience)
	if err != nil {
		return err
	}
	tok, err := env.api.CreateToken(ctx, client.TokenCreate{Name: "bench", ExpiresIn: "1h"})
	if err != nil {
		return err
	}
	jwt := issuer.Sign(issuer.Claims("bench", audience))
	arms := []*authArm{
		{name: "--auth=none", url: openURL},
		{name: "API token", url: env.gatewayURL, authorization: "Bearer " + tok.Value},
		{name: "RS256 JWT", url: jwtURL, authorization: "Bearer " + jwt},
	}
	hc := armClient(env)
	defer hc.CloseIdleConnections()
	fmt.Printf("three gateways on one store and admission: --auth=none, API tokens, OIDC (a loopback issuer); c=32; %d rounds, each arm twice per round in mirrored order (A B C C B A: a throughput that drifts as the tables grow weighs on every arm alike), 8 s per slot after 1 s warmup\n", authRounds)
	ratios, err := measureArms(ctx, hc, arms, "auth")
	if err != nil {
		return err
	}
	var targets []targetResult
	for a, arm := range arms[1:] {
		r := median(ratios[a+1])
		targets = append(targets, targetResult{name: "creates/s with " + arm.name + " vs --auth=none",
			ok: r > 0.95, detail: fmt.Sprintf("median %.0f vs %.0f; median of the rounds' ratios %.3f: %.1f%% lower (target < 5%%)",
				median(arm.rates), median(arms[0].rates), r, 100*(1-r))})
	}
	printTargets(targets...)
	return nil
}

// createAuthBenchType creates the type the arms create resources of.
func createAuthBenchType(ctx context.Context, env *benchEnv) error {
	_, err := env.postJSON(ctx, "/api/v1/resource-types", map[string]any{
		"name": "DatabaseCluster", "version": "v1beta1", "description": "Managed database cluster", "schema": json.RawMessage(databaseClusterSchema),
	})
	return err
}

// armClient is a client of the arms' own, sending exactly each arm's
// header.
func armClient(env *benchEnv) *http.Client {
	return &http.Client{Timeout: 60 * time.Second, Transport: http1Transport(env.roots)}
}

// measureArms measures API creates/s through each arm in authRounds
// rounds, each arm twice a round in mirrored order, and prints a row per
// round and arm. It returns each arm's ratios to the first arm's, one per
// round (arms[i].rates gets its rates).
func measureArms(ctx context.Context, hc *http.Client, arms []*authArm, prefix string) ([][]float64, error) {
	tw := newTable()
	fmt.Fprintf(tw, "round\tarm\tcreates/s\tvs %s\tp99\n", arms[0].name)
	ratios := make([][]float64, len(arms))
	for round := range authRounds {
		order := make([]int, 0, 2*len(arms))
		for i := range arms {
			order = append(order, (i+round)%len(arms))
		}
		for i := len(arms) - 1; i >= 0; i-- {
			order = append(order, order[i])
		}
		ops := make([]int, len(arms))
		elapsed := make([]time.Duration, len(arms))
		p99 := make([]time.Duration, len(arms))
		for slot, a := range order {
			arm := arms[a]
			res, err := runLoad(ctx, loadSpec{Concurrency: 32, Warmup: time.Second, Duration: 8 * time.Second}, true, func(ctx context.Context, seq int64) error {
				return authCreate(ctx, hc, arm, fmt.Sprintf("%s-%d-%d-%d-%07d", prefix, round, slot, a, seq))
			})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", arm.name, err)
			}
			ops[a] += res.ops
			elapsed[a] += res.elapsed
			p99[a] = max(p99[a], res.percentile(99))
		}
		rate := func(a int) float64 { return float64(ops[a]) / elapsed[a].Seconds() }
		for a, arm := range arms {
			arm.rates = append(arm.rates, rate(a))
			ratios[a] = append(ratios[a], rate(a)/rate(0))
			fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.3f\t%s\n", round+1, arm.name, rate(a), rate(a)/rate(0), fmtDur(p99[a]))
		}
	}
	tw.Flush()
	return ratios, nil
}

// authCreate creates one resource through arm's gateway with its header.
func authCreate(ctx context.Context, hc *http.Client, arm *authArm, name string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, arm.url+"/api/v1/resources", bytes.NewReader(apiCreateBody("v1beta1", name)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if arm.authorization != "" {
		req.Header.Set("Authorization", arm.authorization)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("create %s: %d", name, resp.StatusCode)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// median of xs, the mean of the two middle values for an even count (xs
// is not sorted in place).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	switch {
	case len(s) == 0:
		return 0
	case len(s)%2 == 0:
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}
