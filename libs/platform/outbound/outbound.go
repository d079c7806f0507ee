package outbound

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Class is what kind of destination an IP address is.
type Class string

// The classes of address. Public is always allowed; Loopback, Private and
// LinkLocal only when a Policy allows them; Reserved never.
const (
	// Public is any address not in the ranges below.
	Public Class = "public"
	// Loopback is 127.0.0.0/8, ::1, and the unspecified and "this host"
	// addresses (0.0.0.0/8, ::), which reach the local host too.
	Loopback Class = "loopback"
	// Private is 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, the shared
	// (carrier-grade NAT) 100.64.0.0/10 and the unique local fc00::/7.
	Private Class = "private"
	// LinkLocal is 169.254.0.0/16 and fe80::/10, where cloud metadata
	// services live (169.254.169.254), and AWS's IPv6 metadata address
	// fd00:ec2::254.
	LinkLocal Class = "link-local"
	// Reserved is multicast, broadcast and the other special-purpose ranges
	// (benchmarking, documentation, 240.0.0.0/4, IPv4-compatible IPv6).
	Reserved Class = "reserved"
)

// ErrRefused is matched (errors.Is) by every refusal of the address rule.
var ErrRefused = errors.New("outbound address not allowed")

// RefusedError is a destination that the policy does not allow.
type RefusedError struct {
	// Host is the name or address as given.
	Host string
	// Addr is the address it names or resolved to.
	Addr netip.Addr
	// Class is Addr's class.
	Class Class
}

// Error implements error.
func (e *RefusedError) Error() string {
	what := "a " + string(e.Class) + " address"
	if e.Class == LinkLocal {
		what += " (where cloud metadata services live)"
	}
	if e.Host != "" && e.Host != e.Addr.String() {
		return fmt.Sprintf("%s is %s, %s, which outbound calls may not reach", e.Host, e.Addr, what)
	}
	return fmt.Sprintf("%s is %s, which outbound calls may not reach", e.Addr, what)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Policy says which classes of address besides Public may be reached. The
// zero Policy allows public addresses only.
type Policy struct {
	// AllowLoopback allows the Loopback class (webhooks on the same host).
	AllowLoopback bool
	// AllowPrivate allows the Private class (webhooks in a private network).
	AllowPrivate bool
	// AllowLinkLocal allows the LinkLocal class, cloud metadata included:
	// almost never what you want.
	AllowLinkLocal bool
}

// DevPolicy is the policy of `no8s dev`: loopback and private addresses are
// allowed (webhooks on the developer's machine), link-local ones are not.
func DevPolicy() Policy { return Policy{AllowLoopback: true, AllowPrivate: true} }

// ParsePolicy reads a comma-separated list of classes to allow
// ("loopback,private", "link-local"; "" or "none" for public only), the
// format of the services' --outbound-allow flag.
func ParsePolicy(s string) (Policy, error) {
	var p Policy
	for part := range strings.SplitSeq(s, ",") {
		switch Class(strings.TrimSpace(part)) {
		case "", "none":
		case Loopback:
			p.AllowLoopback = true
		case Private:
			p.AllowPrivate = true
		case LinkLocal:
			p.AllowLinkLocal = true
		default:
			return Policy{}, fmt.Errorf("outbound policy %q: %q is not a class of address (loopback, private, link-local)", s, part)
		}
	}
	return p, nil
}

// Set parses s into p (ParsePolicy's format), so that a *Policy is a
// flag.Value.
func (p *Policy) Set(s string) error {
	v, err := ParsePolicy(s)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Type names the value in command-line help (spf13/pflag's Value).
func (p *Policy) Type() string { return "classes" }

// String is the policy in ParsePolicy's format.
func (p Policy) String() string {
	var parts []string
	if p.AllowLoopback {
		parts = append(parts, string(Loopback))
	}
	if p.AllowPrivate {
		parts = append(parts, string(Private))
	}
	if p.AllowLinkLocal {
		parts = append(parts, string(LinkLocal))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// Allows reports whether addresses of class c may be reached.
func (p Policy) Allows(c Class) bool {
	switch c {
	case Public:
		return true
	case Loopback:
		return p.AllowLoopback
	case Private:
		return p.AllowPrivate
	case LinkLocal:
		return p.AllowLinkLocal
	}
	return false
}

// CheckAddr returns a *RefusedError when addr may not be reached; host is
// how the caller named it (for the message).
func (p Policy) CheckAddr(host string, addr netip.Addr) error {
	if c := Classify(addr); !p.Allows(c) {
		return &RefusedError{Host: host, Addr: addr.WithZone(""), Class: c}
	}
	return nil
}

// CheckURL checks the host of a URL before it is stored: an address in any
// spelling is classified, and so are the names localhost and *.localhost.
// Other names are checked when they are connected to. It returns a
// *RefusedError, or an error when the URL does not parse.
func (p Policy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parse url: %w", err)
	}
	host := u.Hostname()
	if addr, ok := ParseHost(host); ok {
		return p.CheckAddr(host, addr)
	}
	if isLocalhost(host) && !p.AllowLoopback {
		return &RefusedError{Host: host, Addr: netip.IPv6Loopback(), Class: Loopback}
	}
	return nil
}

// isLocalhost reports whether name is localhost or under .localhost
// (RFC 6761: always the loopback).
func isLocalhost(name string) bool {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	return name == "localhost" || strings.HasSuffix(name, ".localhost")
}

// Classify returns the class of addr. An IPv4 address embedded in IPv6
// (IPv4-mapped ::ffff:a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16) is
// classified as that IPv4 address.
func Classify(addr netip.Addr) Class {
	addr = embeddedV4(addr.WithZone(""))
	if addr.IsLoopback() || addr.IsUnspecified() {
		return Loopback
	}
	for _, r := range ranges {
		if r.prefix.Contains(addr) {
			return r.class
		}
	}
	switch {
	case addr.IsLinkLocalUnicast():
		return LinkLocal
	case addr.IsPrivate():
		return Private
	case addr.IsMulticast(), addr.IsLinkLocalMulticast(), addr.IsInterfaceLocalMulticast():
		return Reserved
	}
	return Public
}

// classRange is a special-purpose range and its class.
type classRange struct {
	prefix netip.Prefix
	class  Class
}

// ranges are the special-purpose ranges that netip's predicates do not name
// (or name with another class), checked first.
var ranges = []classRange{
	{netip.MustParsePrefix("fd00:ec2::254/128"), LinkLocal}, // AWS's IPv6 metadata service
	{netip.MustParsePrefix("0.0.0.0/8"), Loopback},
	{netip.MustParsePrefix("100.64.0.0/10"), Private},
	{netip.MustParsePrefix("255.255.255.255/32"), Reserved},
	{netip.MustParsePrefix("192.0.0.0/24"), Reserved},
	{netip.MustParsePrefix("192.0.2.0/24"), Reserved},
	{netip.MustParsePrefix("198.18.0.0/15"), Reserved},
	{netip.MustParsePrefix("198.51.100.0/24"), Reserved},
	{netip.MustParsePrefix("203.0.113.0/24"), Reserved},
	{netip.MustParsePrefix("240.0.0.0/4"), Reserved},
	{netip.MustParsePrefix("::/96"), Reserved}, // IPv4-compatible; :: itself is IsUnspecified
	{netip.MustParsePrefix("100::/64"), Reserved},
	{netip.MustParsePrefix("2001:db8::/32"), Reserved},
}

// embeddedV4 returns the IPv4 address embedded in addr, or addr.
func embeddedV4(addr netip.Addr) netip.Addr {
	if addr.Is4In6() {
		return addr.Unmap()
	}
	if !addr.Is6() {
		return addr
	}
	b := addr.As16()
	switch {
	case slices.Equal(b[:12], []byte{0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0}): // NAT64 64:ff9b::/96
		return netip.AddrFrom4([4]byte(b[12:16]))
	case b[0] == 0x20 && b[1] == 0x02: // 6to4 2002:V4ADDR::/48
		return netip.AddrFrom4([4]byte(b[2:6]))
	}
	return addr
}

// ParseHost reads host as an IP address in any spelling that a C resolver
// (inet_aton) or a URL parser accepts: dotted IPv4 with one to four parts,
// each decimal, octal (leading 0) or hexadecimal (0x), so 2852039166,
// 0xa9fea9fe, 0251.0376.0251.0376 and 169.254.43518 all name
// 169.254.169.254; IPv6 with or without brackets and zone, IPv4-mapped
// included. A trailing dot is ignored. ok is false for a name.
func ParseHost(host string) (addr netip.Addr, ok bool) {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(h); err == nil {
		return a.WithZone(""), true
	}
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return netip.Addr{}, false
	}
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		v, ok := parseInetPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	// All parts but the last are one byte; the last fills the rest.
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// parseInetPart reads one part of an inet_aton address.
func parseInetPart(p string) (uint64, bool) {
	base, digits := 10, p
	switch {
	case len(p) > 1 && (p[:2] == "0x" || p[:2] == "0X"):
		base, digits = 16, p[2:]
		if digits == "" {
			return 0, true // "0x" is 0 to inet_aton
		}
	case len(p) > 1 && p[0] == '0':
		base, digits = 8, p[1:]
	}
	if digits == "" || strings.ContainsAny(digits, "+-_") {
		return 0, false
	}
	v, err := strconv.ParseUint(digits, base, 32)
	if err != nil {
		return 0, false
	}
	return v, true
}
