// Package outbound is the one place where no8s decides which addresses a
// server-side outbound call may reach. Admission webhooks use it today; the
// datasources, HTTP actions and HTTP polling to come use it too, and so can
// any reconciler built on the SDK that calls URLs its users supply.
//
// The rule: a destination is classified by its IP address (loopback,
// private, link-local, unspecified, multicast or public); public addresses
// are always allowed, every other class only when the Policy names it.
// Link-local addresses (169.254.0.0/16, fe80::/10), which hold cloud
// metadata services such as 169.254.169.254, are refused unless a Policy
// explicitly allows them.
//
// The rule is applied twice:
//
//   - at registration, by Policy.CheckURL, which reads every spelling of an
//     IPv4 address that a C resolver accepts (2852039166, 0xa9fea9fe,
//     0251.0376.0251.0376, 169.254.43518, ::ffff:169.254.169.254, ...), so
//     that a URL is refused with a field error before it is stored;
//   - at connect time, by the dialer of Policy.Client/Policy.Transport,
//     which resolves the name itself (through an injectable Resolver),
//     checks every resolved address and connects to the checked address
//     only, and checks the socket's address once more just before
//     connecting. A name that resolves to a public address at registration
//     and to 169.254.169.254 later (DNS rebinding) is refused then.
//
// Clients built here do not follow redirects (a redirect could lead
// anywhere) and ignore proxy environment variables (a proxy would connect
// on our behalf and escape the check).
package outbound
