package main

// bench_roles.go is the "api-roles" scenario: API creates/s by a service
// account whose every request is decided against 50 Roles and 200 bindings,
// against the administrator's (whose requests consult no role: as with no
// roles loaded), on one gateway, back to back in alternating rounds.

import (
	"context"
	"fmt"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/services/internal/rbac"
)

// The policy the scenario loads.
const (
	benchRoles    = 50
	benchBindings = 200
)

// benchAPIRoles is the "api-roles" scenario.
func benchAPIRoles(ctx context.Context, env *benchEnv) error {
	if err := env.Fresh(ctx); err != nil {
		return err
	}
	if err := createAuthBenchType(ctx, env); err != nil {
		return err
	}
	if err := loadBenchPolicy(ctx, env); err != nil {
		return err
	}
	tok, err := env.api.CreateToken(ctx, client.TokenCreate{Name: "bench", ServiceAccount: true, ExpiresIn: "1h"})
	if err != nil {
		return err
	}
	// The administrator's own API token: authenticated as the service
	// account is (an API token looked up), and consulting no role.
	adminTok, err := env.api.CreateToken(ctx, client.TokenCreate{Name: "bench-admin", ExpiresIn: "1h"})
	if err != nil {
		return err
	}
	arms := []*authArm{
		{name: "no roles consulted (admin's API token)", url: env.gatewayURL, authorization: "Bearer " + adminTok.Value},
		{name: fmt.Sprintf("%d roles, %d bindings", benchRoles, benchBindings), url: env.gatewayURL, authorization: "Bearer " + tok.Value},
		{name: "bootstrap token (no lookup, no role)", url: env.gatewayURL, authorization: "Bearer " + env.bootstrapToken},
	}
	hc := armClient(env)
	defer hc.CloseIdleConnections()
	fmt.Printf("one gateway: the administrator's API token (no role consulted) vs service account bench's, bound by one of %d bindings to one of %d Roles (the gateway reads them again every second while asked), and the bootstrap token for reference; c=32; %d rounds, each arm twice per round in mirrored order, 8 s per slot after 1 s warmup\n",
		benchBindings, benchRoles, authRounds)
	ratios, err := measureArms(ctx, hc, arms, "roles")
	if err != nil {
		return err
	}
	r := median(ratios[1])
	printTargets(targetResult{name: "creates/s with 50 roles and 200 bindings vs none",
		ok: r > 0.95, detail: fmt.Sprintf("median %.0f vs %.0f; median of the rounds' ratios %.3f: %.1f%% lower (target < 5%%)",
			median(arms[1].rates), median(arms[0].rates), r, 100*(1-r))})
	return nil
}

// loadBenchPolicy creates benchRoles Roles in the default namespace, each
// granting every verb on a few types, and benchBindings bindings of them
// to service accounts and groups: service account bench is bound, by one
// of them, to a Role that lets it create DatabaseClusters.
func loadBenchPolicy(ctx context.Context, env *benchEnv) error {
	create := func(typ, name string, spec any) error {
		_, err := env.postJSON(ctx, "/api/v1/resources", map[string]any{
			"resource_type_name": typ, "resource_type_version": rbac.Version, "namespace": "default", "name": name, "spec": spec,
		})
		return err
	}
	for i := range benchRoles {
		spec := rbac.RoleSpec{Rules: []rbac.Rule{
			{Verbs: []string{rbac.VerbGet, rbac.VerbList, rbac.VerbWatch}, Types: []string{fmt.Sprintf("Queue%d", i), fmt.Sprintf("Bucket%d", i)}},
			{Verbs: []string{rbac.VerbCreate, rbac.VerbUpdate, rbac.VerbDelete}, Types: []string{fmt.Sprintf("Cache%d", i)}, Names: []string{"a", "b"}},
			{Verbs: []string{rbac.VerbGet, rbac.VerbCreate}, Types: []string{"DatabaseCluster"}},
		}}
		if err := create(rbac.RoleType, fmt.Sprintf("role-%d", i), spec); err != nil {
			return err
		}
	}
	for i := range benchBindings {
		subject := rbac.Subject{Kind: rbac.SubjectServiceAccount, Name: fmt.Sprintf("sa-%d", i)}
		if i%3 == 0 {
			subject = rbac.Subject{Kind: rbac.SubjectGroup, Name: fmt.Sprintf("team-%d", i)}
		}
		typ, ref := rbac.RoleBindingType, rbac.RoleRef{Kind: rbac.RoleType, Name: fmt.Sprintf("role-%d", i%benchRoles)}
		switch {
		case i == benchBindings/2+1:
			subject = rbac.Subject{Kind: rbac.SubjectServiceAccount, Name: "bench"}
		case i%10 == 0:
			typ, ref = rbac.ClusterRoleBindingType, rbac.RoleRef{Kind: rbac.ClusterRoleType, Name: rbac.RoleViewer}
		}
		if err := create(typ, fmt.Sprintf("binding-%d", i), rbac.BindingSpec{RoleRef: ref, Subjects: []rbac.Subject{subject}}); err != nil {
			return err
		}
	}
	return nil
}
