package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// templateBombs are the probe's template bombs: each must be refused at
// admission in under 2 s with its budget named.
var templateBombs = []struct{ name, text, budget string }{
	{"repeat", `{{ repeat 100000000 "x" }}`, "value size"},
	{"until", `{{ range until 100000000 }}x{{ end }}`, "value size"},
	{"nested range", `{{ range until 16000 }}{{ range until 16000 }}{{ end }}{{ end }}`, "steps"},
}

// vmHWM is a process's peak resident memory (VmHWM of /proc/<pid>/status),
// in MiB.
func vmHWM(t *testing.T, p *proc) float64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb / 1024
		}
	}
	t.Fatalf("%s: no VmHWM", p.name)
	return 0
}

// checkPeaks fails when any process's peak memory reached 300 MiB.
func checkPeaks(t *testing.T, procs ...*proc) {
	t.Helper()
	for _, p := range procs {
		mib := vmHWM(t, p)
		t.Logf("%s: VmHWM %.1f MiB", p.name, mib)
		if mib >= 300 {
			t.Errorf("%s peaked at %.1f MiB (limit 300)", p.name, mib)
		}
	}
}

// postBombs sends every template bomb in a TenantTemplate of registry and
// in an HttpSource making target (its spec field value), and wants each
// refused with 400 naming the budget in under 2 s.
func postBombs(t *testing.T, base, ns, registry, target string) {
	t.Helper()
	for _, b := range templateBombs {
		for kind, body := range map[string]map[string]any{
			"TenantTemplate": {"name": "bomb", "namespace": ns, "resource_type_name": "TenantTemplate", "resource_type_version": "v1",
				"spec": map[string]any{"registryId": registry, "resources": []map[string]any{
					childEntry("app", target, "{{ .uid }}-app", map[string]any{"value": b.text})}}},
			"HttpSource": {"name": "bomb", "namespace": ns, "resource_type_name": "HttpSource", "resource_type_version": "v1", "spec": map[string]any{
				"url": "http://127.0.0.1:1/items", "target": map[string]any{"typeName": target, "typeVersion": "v1"},
				"namePointer": "/id", "spec": map[string]any{"value": b.text}}},
		} {
			start := time.Now()
			r := do(t, "POST", base+"/api/v1/resources", body)
			took := time.Since(start)
			if r.status != 400 || !strings.Contains(string(r.body), "render budget exceeded: "+b.budget) || took >= 2*time.Second {
				t.Fatalf("%s bomb %s: %d in %v: %s", kind, b.name, r.status, took, r.body)
			}
			t.Logf("%s bomb %s refused in %v: %.200s", kind, b.name, took.Round(time.Millisecond), r.body)
		}
	}
}

// rowBomb is a template that passes admission's sample (plan "sample" is
// no number: repeat 0) and explodes on a row whose plan is 100000000.
func rowBomb(target string) map[string]any {
	return childEntry("app", target, "{{ .uid }}-app", map[string]any{"value": `{{ repeat (atoi .plan) "x" }}`})
}

// TestTemplateBudgets is issue 26's scope 4 with real processes: the
// probe's bombs in TenantTemplates and HttpSources refused at admission in
// under 2 s naming the budget; a bomb that passes the sample row but
// explodes on a real one fails that Tenant only; admission's and
// registry-sync's peak memory stays under 300 MiB.
func TestTemplateBudgets(t *testing.T) {
	c := newChildCluster(t)
	ds := newMariaDB(t)
	ds.exec(`INSERT INTO tenants (id, url, active, plan) VALUES ('small', 'small.example.com', '1', '3'), ('bomb', 'bomb.example.com', '1', '100000000')`)
	c.create(registryBody("customers", ds.source()))
	postBombs(t, c.base, c.ns, "customers", "TApp")
	if n := c.count(`SELECT count(*) FROM resources WHERE name = 'bomb'`); n != 0 {
		t.Fatalf("%d refused bombs stored", n)
	}

	c.template("web", "customers", rowBomb("TApp"))
	c.waitTenantReady("small-web", 1)
	if a := c.get("TApp", "small-app"); a == nil || !strings.Contains(string(a.Spec), `"xxx"`) {
		t.Fatalf("small-app %+v", a)
	}
	bomb := c.waitTenantDegraded("bomb-web", "render budget exceeded: value size")
	cond, _ := readyCondition(bomb)
	t.Logf("bomb-web: %s", cond.Message)
	if c.get("TApp", "bomb-app") != nil {
		t.Fatal("the bomb Tenant's child was applied")
	}
	checkPeaks(t, append([]*proc{c.admissionProcs[0]}, c.syncs...)...)
}

// TestTemplateBudgetsDev: the same bombs against `no8s dev` (embedded
// store, every service in one process, the tenant reconciler included):
// refused at admission, the row bomb fails its Tenant only, and the
// process stays under 300 MiB.
func TestTemplateBudgetsDev(t *testing.T) {
	addrs, dev := startDevServing(t, noPostgreSQL(), "TApp", map[string]any{
		"type": "object", "required": []string{"value"}, "properties": map[string]any{"value": map[string]any{"type": "string"}}})
	base := addrs.APIURL
	tc := &tenantCluster{cluster: &cluster{t: t, gateways: []string{base}}, base: base, ns: "default"}
	ds := newMariaDB(t)
	ds.exec(`INSERT INTO tenants (id, url, active, plan) VALUES ('small', 'small.example.com', '1', '3'), ('bomb', 'bomb.example.com', '1', '100000000')`)
	tc.create(registryBody("customers", ds.source()))
	postBombs(t, base, "default", "customers", "TApp")
	tc.template("web", "customers", rowBomb("TApp"))
	tc.waitTenantReady("small-web", 1)
	tc.waitTenantDegraded("bomb-web", "render budget exceeded: value size")
	checkPeaks(t, dev)
}
