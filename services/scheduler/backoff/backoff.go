// Package backoff computes retry delays: exponential from a base, capped,
// with a jitter that is a pure function of a seed, so that a scheduler
// rebuilding its state after a failover computes the same due times.
package backoff

import (
	"math"
	"time"
)

// DefaultJitter is the fraction by which a delay may vary either way.
const DefaultJitter = 0.1

// Delay returns the wait before the retry that follows the given number of
// consecutive failures (at least 1): base·2^(failures-1), capped at limit,
// then varied by ±jitter (a fraction of the delay) chosen from seed.
func Delay(base, limit time.Duration, failures int, jitter float64, seed uint64) time.Duration {
	if failures < 1 {
		failures = 1
	}
	if limit < base {
		limit = base
	}
	d := limit
	if failures-1 < 62 {
		if f := float64(base) * math.Exp2(float64(failures-1)); f < float64(limit) {
			d = time.Duration(f)
		}
	}
	if jitter <= 0 {
		return d
	}
	// A fraction in [-1, 1) from the seed.
	u := float64(mix(seed)>>11)/float64(1<<53)*2 - 1
	return d + time.Duration(float64(d)*jitter*u)
}

// mix is splitmix64's finaliser: a well-spread hash of x.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Seed combines numbers (a resource id, its failure count, the time of its
// last attempt) into a jitter seed.
func Seed(parts ...int64) uint64 {
	var s uint64
	for _, p := range parts {
		s = mix(s ^ uint64(p))
	}
	return s
}
