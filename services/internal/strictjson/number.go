package strictjson

import (
	"fmt"
	"strconv"
	"strings"
)

// Limits of a number literal. A number the API accepts must be finite as an
// IEEE 754 double (what every JSON client reads it as), must not be a non-zero
// value that a double rounds to zero, and must stay short both as written and
// as PostgreSQL writes it back (jsonb stores numbers as numeric and prints them
// without an exponent: 1e300 comes back as 301 digits). Because [Expand] is
// idempotent, a number that passes passes again in its stored form: a
// document that was accepted once stays readable and writable.
const (
	// MaxNumberLen bounds a number literal, as sent and as expanded.
	MaxNumberLen = 1024
	// NumberRangeMessage explains a refused number.
	NumberRangeMessage = "number out of range: it must be a finite IEEE 754 double (about ±1.8e308, " +
		"non-zero values at least 4.9e-324 in magnitude) written in at most 1024 characters, also without an exponent"
)

// literal is a JSON number taken apart: its value is
// sign · intDigits.frac · 10^exp.
type literal struct {
	neg                 bool
	intDigits, frac     string
	exp                 int64
	expOverflow         bool
	nonZero             bool
	expandedInt, dscale int64
}

// parse splits a syntactically valid JSON number literal.
func parse(lit string) literal {
	var l literal
	s := lit
	if strings.HasPrefix(s, "-") {
		l.neg, s = true, s[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.ReplaceAll(s, "E", "e"), "e")
	l.intDigits, l.frac, _ = strings.Cut(mant, ".")
	if hasExp {
		neg := false
		switch {
		case strings.HasPrefix(expPart, "-"):
			neg, expPart = true, expPart[1:]
		case strings.HasPrefix(expPart, "+"):
			expPart = expPart[1:]
		}
		for _, c := range []byte(expPart) {
			l.exp = l.exp*10 + int64(c-'0')
			if l.exp > 1<<40 {
				l.expOverflow = true
				break
			}
		}
		if neg {
			l.exp = -l.exp
		}
	}
	l.nonZero = strings.Trim(l.intDigits+l.frac, "0") != ""
	// PostgreSQL's numeric: the number of digits after the point is the
	// fraction's length minus the exponent, never negative; the integer part
	// has its leading zeros dropped (at least "0").
	l.dscale = max(0, int64(len(l.frac))-l.exp)
	sig := strings.TrimLeft(l.intDigits+l.frac, "0")
	// Position of the decimal point counted from the end of the digits.
	intLen := int64(len(sig)) - int64(len(l.frac)) + l.exp
	l.expandedInt = max(1, intLen)
	return l
}

// expandedLen is the length of the expanded form.
func (l literal) expandedLen() int64 {
	n := l.expandedInt
	if l.dscale > 0 {
		n += 1 + l.dscale
	}
	if l.neg && l.nonZero {
		n++
	}
	return n
}

// NumberOK reports whether a JSON number literal (syntactically valid) is
// within the limits described at [MaxNumberLen]. The bounds on length and
// exponent also keep the exact arithmetic of schema validation (math/big)
// cheap: big.Rat.SetString computes 10^exponent.
func NumberOK(lit string) bool {
	if plainNumber(lit) {
		return true
	}
	if len(lit) > MaxNumberLen {
		return false
	}
	l := parse(lit)
	if l.expOverflow || l.exp > MaxNumberLen || l.exp < -MaxNumberLen || l.expandedLen() > MaxNumberLen {
		return false
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return false // ±Inf: out of a double's range
	}
	return f != 0 || !l.nonZero // a non-zero value must not round to zero
}

// plainNumber reports whether a valid literal is short and has no exponent:
// such a number (at most 15 characters: |x| < 1e15, non-zero |x| ≥ 1e-13)
// is always a finite double that does not round to zero, and PostgreSQL
// writes it back as it is. Almost every number in a spec is one, and this
// spares it the exact checks.
func plainNumber[T string | []byte](lit T) bool {
	if len(lit) > 15 {
		return false
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] == 'e' || lit[i] == 'E' {
			return false
		}
	}
	return true
}

// CheckNumber returns an error naming why lit is refused, or nil.
func CheckNumber(lit string) error {
	if NumberOK(lit) {
		return nil
	}
	return fmt.Errorf("%s: %s", abbreviate(lit), NumberRangeMessage)
}

// Expand writes a valid number literal that [NumberOK] accepts the way
// PostgreSQL's jsonb writes it back: no exponent, the integer part without
// leading zeros, as many fraction digits as the literal has after its point
// minus its exponent, and no sign on zero. 1e2 is 100, 1.50e1 is 15.0,
// 1.5e-3 is 0.0015, -0.00 is 0.00.
func Expand(lit string) string {
	l := parse(lit)
	digits := l.intDigits + l.frac
	// point is the index in digits after which the decimal point goes.
	point := int64(len(l.intDigits)) + l.exp
	var intPart, fracPart string
	switch {
	case point <= 0:
		intPart = "0"
		fracPart = strings.Repeat("0", int(-point)) + digits
	case point >= int64(len(digits)):
		intPart = digits + strings.Repeat("0", int(point-int64(len(digits))))
	default:
		intPart, fracPart = digits[:point], digits[point:]
	}
	intPart = strings.TrimLeft(intPart, "0")
	if intPart == "" {
		intPart = "0"
	}
	// fracPart has exactly dscale digits when dscale > 0 (see parse).
	var b strings.Builder
	if l.neg && l.nonZero {
		b.WriteByte('-')
	}
	b.WriteString(intPart)
	if l.dscale > 0 {
		b.WriteByte('.')
		b.WriteString(fracPart)
	}
	return b.String()
}

// canonicalNumber is a form of lit equal for equal values: expanded, without
// trailing zeros after the point.
func canonicalNumber(lit string) string {
	e := Expand(lit)
	if strings.Contains(e, ".") {
		e = strings.TrimRight(strings.TrimRight(e, "0"), ".")
	}
	if e == "-0" {
		e = "0"
	}
	return e
}

func abbreviate(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

// Expanded returns data, a JSON document whose numbers [NumberOK] accepts,
// with every number written as [Expand] writes it: the numbers as PostgreSQL
// stores and returns them. A schema is compiled in this form, so that it
// compiles exactly as it will be read back.
func Expanded(data []byte) []byte {
	out := make([]byte, 0, len(data))
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			j := i + 1
			for j < len(data) && data[j] != '"' {
				if data[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(data))
			out = append(out, data[i:j]...)
			i = j - 1
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(data) && isNumberByte(data[j]) {
				j++
			}
			lit := string(data[i:j])
			if NumberOK(lit) {
				out = append(out, Expand(lit)...)
			} else {
				out = append(out, lit...)
			}
			i = j - 1
		default:
			out = append(out, c)
		}
	}
	return out
}
