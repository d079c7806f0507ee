package authn

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
)

// An API token is "no8s_<id>_<secret>": id names its record (public, shown
// in lists), secret is 32 random bytes, both lowercase base32 without
// padding. The store keeps only SHA-256(secret).
const (
	tokenPrefix = "no8s_"
	idBytes     = 10
	secretBytes = 32
)

var tokenEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

var (
	idLen     = tokenEncoding.EncodedLen(idBytes)
	secretLen = tokenEncoding.EncodedLen(secretBytes)
	// TokenLen is the length of every API token string.
	TokenLen = len(tokenPrefix) + idLen + 1 + secretLen
)

// ErrMalformedToken is returned by ParseToken for a string that is not an
// API token.
var ErrMalformedToken = errors.New("not an API token")

// NewToken generates a token: its id, the hash of its secret and the
// string to hand out once.
func NewToken() (id string, hash []byte, token string, err error) {
	buf := make([]byte, idBytes+secretBytes)
	if _, err := rand.Read(buf); err != nil {
		return "", nil, "", fmt.Errorf("generate token: %w", err)
	}
	id = tokenEncoding.EncodeToString(buf[:idBytes])
	secret := tokenEncoding.EncodeToString(buf[idBytes:])
	return id, HashSecret(secret), tokenPrefix + id + "_" + secret, nil
}

// IsToken reports whether s has the shape of an API token (its prefix);
// ParseToken says whether it is one.
func IsToken(s string) bool { return strings.HasPrefix(s, tokenPrefix) }

// ParseToken splits an API token into its id and secret.
func ParseToken(s string) (id, secret string, err error) {
	if len(s) != TokenLen || !IsToken(s) {
		return "", "", ErrMalformedToken
	}
	rest := s[len(tokenPrefix):]
	id, secret = rest[:idLen], rest[idLen+1:]
	if rest[idLen] != '_' || !validPart(id, idBytes) || !validPart(secret, secretBytes) {
		return "", "", ErrMalformedToken
	}
	return id, secret, nil
}

// ValidTokenID reports whether id can be an API token's id.
func ValidTokenID(id string) bool { return len(id) == idLen && validPart(id, idBytes) }

// validPart reports whether s is the canonical encoding of n bytes.
func validPart(s string, n int) bool {
	b, err := tokenEncoding.DecodeString(s)
	return err == nil && len(b) == n && tokenEncoding.EncodeToString(b) == s
}

// HashSecret is what the store keeps of a secret.
func HashSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// SecretMatches reports, in constant time, whether secret hashes to hash.
func SecretMatches(secret string, hash []byte) bool {
	return subtle.ConstantTimeCompare(HashSecret(secret), hash) == 1
}
