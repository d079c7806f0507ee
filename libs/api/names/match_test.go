package names

import (
	"regexp"
	"strings"
	"testing"
)

// matchers pairs each matcher with the pattern it implements.
var matchers = []struct {
	pattern string
	match   func(string) bool
}{
	{typeNamePattern, matchTypeName},
	{typeVersionPattern, matchTypeVersion},
	{dnsLabelPattern, matchDNSLabel},
	{qualifiedPattern, matchQualified},
	{dnsSubdomPattern, matchDNSSubdomain},
	{labelValuePattern, matchLabelValue},
	{eventReasonPattern, matchEventReason},
}

// matchSamples are strings at the rules' edges: lengths at and past the
// bounds, every kind of character at the start, middle and end, empty
// parts, versions cut short.
func matchSamples() []string {
	out := []string{"", "a", "A", "0", "-", "_", ".", "/", " ", "a\n", "\na", "é", "aé", "a\x00",
		"v", "v1", "V1", "v01", "v1alpha", "v1alpha1", "v1beta", "v1beta2", "v1gamma1", "v1alpha1x", "valpha1", "v1alphabeta1", "v1beta1beta1", "v12beta034",
		"Pg", "PgX1", "Pg-1", "Pg.X", "pg", "pg-1", "-pg", "pg-", "a--b", "a.b", "a..b", ".a", "a.", "a-.b", "a.-b", "A.b", "a_b", "_a", "a_",
		"example.com", "example.com/app", "x.y.z", "a.b-c.d", "1.2.3",
	}
	for _, n := range []int{62, 63, 64, 127, 128, 129, 253, 254} {
		out = append(out, strings.Repeat("a", n), "A"+strings.Repeat("b", n-1), strings.Repeat("a.", n/2)+"a")
	}
	return out
}

func TestMatchersAgreeWithPatterns(t *testing.T) {
	for _, m := range matchers {
		re := regexp.MustCompile(m.pattern)
		for _, s := range matchSamples() {
			if got, want := m.match(s), re.MatchString(s); got != want {
				t.Errorf("%s on %q: matcher %v, pattern %v", m.pattern, s, got, want)
			}
		}
	}
}

// FuzzMatchers holds every matcher to its pattern on any input.
func FuzzMatchers(f *testing.F) {
	for _, s := range matchSamples() {
		f.Add(s)
	}
	res := make([]*regexp.Regexp, len(matchers))
	for i, m := range matchers {
		res[i] = regexp.MustCompile(m.pattern)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i, m := range matchers {
			if got, want := m.match(s), res[i].MatchString(s); got != want {
				t.Errorf("%s on %q: matcher %v, pattern %v", m.pattern, s, got, want)
			}
		}
	})
}

func BenchmarkNameChecks(b *testing.B) {
	for b.Loop() {
		_ = Name("/name", "orders-db-000123")
		_ = QualifiedKey("/labels", "app.kubernetes.io/part-of")
		_ = LabelValue("/labels", "checkout_v2.1")
		_ = TypeName("/type", "DatabaseCluster")
		_ = TypeVersion("/version", "v1beta1")
	}
}
