package names

// The name rules as patterns (what error messages quote) and their matchers:
// byte loops, not regular expressions, as every create and update checks
// several names and labels on the API's path (each a regular expression
// match of about a microsecond, 3-4% of the gateway's, admission's and the
// store's CPU at 32 concurrent creates). TestMatchersAgreeWithPatterns and
// FuzzMatchers hold each matcher to its pattern.
const (
	typeNamePattern    = `^[A-Z][A-Za-z0-9]{0,62}$`
	typeVersionPattern = `^v[0-9]+((alpha|beta)[0-9]+)?$`
	dnsLabelPattern    = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	qualifiedPattern   = `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	dnsSubdomPattern   = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	labelValuePattern  = `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	eventReasonPattern = `^[A-Z][A-Za-z0-9]{0,127}$`
)

func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isAlnum(c byte) bool { return isLower(c) || isUpper(c) || isDigit(c) }

// camelWord matches ^[A-Z][A-Za-z0-9]{0,limit-1}$.
func camelWord(s string, limit int) bool {
	if s == "" || len(s) > limit || !isUpper(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isAlnum(s[i]) {
			return false
		}
	}
	return true
}

// matchTypeName matches typeNamePattern.
func matchTypeName(s string) bool { return camelWord(s, 63) }

// matchEventReason matches eventReasonPattern.
func matchEventReason(s string) bool { return camelWord(s, MaxEventReasonLength) }

// digits is the length of the run of ASCII digits s begins with.
func digits(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
}

// matchTypeVersion matches typeVersionPattern.
func matchTypeVersion(s string) bool {
	if s == "" || s[0] != 'v' {
		return false
	}
	n := digits(s[1:])
	if n == 0 {
		return false
	}
	rest := s[1+n:]
	switch {
	case rest == "":
		return true
	case len(rest) > 5 && rest[:5] == "alpha":
		rest = rest[5:]
	case len(rest) > 4 && rest[:4] == "beta":
		rest = rest[4:]
	default:
		return false
	}
	return len(rest) > 0 && digits(rest) == len(rest)
}

// matchDNSLabel matches dnsLabelPattern: lower-case letters, digits and
// '-', beginning and ending with a letter or digit.
func matchDNSLabel(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isLower(c) && !isDigit(c) && c != '-' {
			return false
		}
	}
	return true
}

// matchDNSSubdomain matches dnsSubdomPattern: DNS labels joined by '.'.
func matchDNSSubdomain(s string) bool {
	for {
		i := 0
		for i < len(s) && s[i] != '.' {
			i++
		}
		if !matchDNSLabel(s[:i]) {
			return false
		}
		if i == len(s) {
			return true
		}
		s = s[i+1:]
	}
}

// matchQualified matches qualifiedPattern: letters, digits, '-', '_' and
// '.', beginning and ending with a letter or digit.
func matchQualified(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// matchLabelValue matches labelValuePattern: empty, or qualified.
func matchLabelValue(s string) bool { return s == "" || matchQualified(s) }
