package library

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// quantityFormat is the suffix family a quantity was written with; it only
// decides how the quantity is printed.
type quantityFormat uint8

const (
	decimalExponent quantityFormat = iota // 12e6
	binarySI                              // 12Mi
	decimalSI                             // 12M
)

// quantitySplitRE is the expression Kubernetes names in its format error.
const quantitySplitRE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"

// The parse errors of Kubernetes' resource.ParseQuantity, verbatim: they
// reach users in the messages of failed quantity() calls.
var (
	errQuantityFormat  = errors.New("quantities must match the regular expression '" + quantitySplitRE + "'")
	errQuantityNumeric = errors.New("unable to parse numeric part of quantity")
	errQuantitySuffix  = errors.New("unable to parse quantity's suffix")
)

// nanoScale is the finest precision a quantity keeps: parsing rounds
// anything finer up (away from zero) to a multiple of 10^-9.
const nanoScale = 9

// maxInt64Digits is the number of decimal digits an int64 always holds.
const maxInt64Digits = 18

// quantitySuffixChars are the characters a suffix may start with.
const quantitySuffixChars = "eEinumkKMGTP"

// quantity is a Kubernetes resource quantity (1.5G, 512Ki, 100m): an exact
// decimal kept either as an int64 mantissa and base-10 exponent or, when that
// cannot hold it, as an arbitrary-precision decimal (dec non-nil). It is
// immutable: arithmetic returns new values.
type quantity struct {
	i      int64Amount
	dec    *decAmount
	format quantityFormat
	// text is the string the quantity was parsed from when Kubernetes keeps
	// it as the serialized form (it does for some, not all, inputs already
	// in canonical form); String returns it as is.
	text string
}

// quantityParts is a quantity string split into sign, number and suffix.
type quantityParts struct {
	text     string // the whole input
	positive bool
	value    string // the signed number as written, for the decimal parser
	num      string // integer digits without leading zeros ("0" if none)
	denom    string // fraction digits
	suffix   string
}

// scanQuantity splits str like Kubernetes' parseQuantityString: a sign,
// digits, an optional fraction and a suffix made of suffix characters
// optionally followed by a signed integer.
func scanQuantity(str string) (quantityParts, error) {
	p := quantityParts{text: str, positive: true}
	pos := 0
	if pos < len(str) && (str[pos] == '-' || str[pos] == '+') {
		p.positive = str[pos] == '+'
		pos++
	}
	for pos < len(str) && str[pos] == '0' {
		pos++
	}
	if pos == len(str) {
		p.num, p.value = "0", "0"
		return p, nil
	}
	start := pos
	pos = skipDigits(str, pos)
	p.num = str[start:pos]
	if p.num == "" {
		p.num = "0"
	}
	if pos < len(str) && str[pos] == '.' {
		start = pos + 1
		pos = skipDigits(str, start)
		p.denom = str[start:pos]
	}
	p.value = str[:pos]
	suffixStart := pos
	for pos < len(str) && strings.IndexByte(quantitySuffixChars, str[pos]) >= 0 {
		pos++
	}
	if pos < len(str) && (str[pos] == '-' || str[pos] == '+') {
		pos++
	}
	if skipDigits(str, pos) != len(str) {
		return p, errQuantityFormat
	}
	p.suffix = str[suffixStart:]
	return p, nil
}

func skipDigits(s string, pos int) int {
	for pos < len(s) && s[pos] >= '0' && s[pos] <= '9' {
		pos++
	}
	return pos
}

// interpretSuffix returns the base (10 or 2), exponent and format of a
// quantity suffix.
func interpretSuffix(s string) (base, exp int32, f quantityFormat, ok bool) {
	switch s {
	case "":
		return 10, 0, decimalSI, true
	case "n":
		return 10, -9, decimalSI, true
	case "u":
		return 10, -6, decimalSI, true
	case "m":
		return 10, -3, decimalSI, true
	case "k":
		return 10, 3, decimalSI, true
	case "M":
		return 10, 6, decimalSI, true
	case "G":
		return 10, 9, decimalSI, true
	case "T":
		return 10, 12, decimalSI, true
	case "P":
		return 10, 15, decimalSI, true
	case "E":
		return 10, 18, decimalSI, true
	case "Ki", "Mi", "Gi", "Ti", "Pi", "Ei":
		return 2, 10 * int32(1+strings.Index("KMGTPE", s[:1])), binarySI, true
	}
	if len(s) > 1 && (s[0] == 'e' || s[0] == 'E') {
		n, err := strconv.ParseInt(s[1:], 10, 64)
		if err != nil {
			return 0, 0, decimalExponent, false
		}
		// Kubernetes truncates the exponent to 32 bits.
		return 10, int32(n), decimalExponent, true
	}
	return 0, 0, decimalExponent, false
}

// parseQuantity parses a quantity with Kubernetes' grammar and rounding:
// values finer than 10^-9 are rounded up, binary-SI values are capped at
// 2^63-1, and the errors are Kubernetes' own.
func parseQuantity(str string) (quantity, error) {
	if str == "" {
		return quantity{}, errQuantityFormat
	}
	if str == "0" {
		return quantity{format: decimalSI, text: str}, nil
	}
	p, err := scanQuantity(str)
	if err != nil {
		return quantity{}, err
	}
	base, exp, format, ok := interpretSuffix(p.suffix)
	if !ok {
		return quantity{}, errQuantitySuffix
	}
	if q, ok, err := parseFast(p, exp, format); ok || err != nil {
		return q, err
	}
	return parseDecimal(p, base, exp, format)
}

// parseFast is the int64 path of parseQuantity, taken when the digits fit
// an int64 with room for the suffix and at most nano precision.
func parseFast(p quantityParts, exp int32, format quantityFormat) (quantity, bool, error) {
	var precision, scale int32
	mantissa := int64(1)
	switch format {
	case decimalExponent, decimalSI:
		scale = exp
		precision = maxInt64Digits - int32(len(p.num)+len(p.denom))
	case binarySI:
		if exp < 0 || p.denom != "" {
			return quantity{}, false, nil
		}
		mantissa <<= uint64(exp)
		precision = 15 - int32(len(p.num)) - int32(float32(exp)*3/10) - 1
	}
	if precision < 0 {
		return quantity{}, false, nil
	}
	scale -= int32(len(p.denom))
	if scale < -nanoScale {
		return quantity{}, false, nil
	}
	v, err := strconv.ParseInt(p.num+p.denom, 10, 64)
	if err != nil {
		return quantity{}, false, errQuantityNumeric
	}
	r, ok := mulInt64(v, mantissa)
	if !ok {
		return quantity{}, false, nil
	}
	if !p.positive {
		r = -r
	}
	q := quantity{i: int64Amount{value: r, exp: scale}, format: format}
	if keepsText(v, p.num+p.denom, exp, scale, format) {
		q.text = p.text
	}
	return q, true, nil
}

// keepsText reports whether Kubernetes keeps the parsed string as the
// serialized form of a quantity parsed on the int64 path.
func keepsText(v int64, digits string, exp, scale int32, format quantityFormat) bool {
	if format == binarySI {
		return exp%10 == 0 && v&0x07 != 0
	}
	return scale%3 == 0 && !strings.HasSuffix(digits, "000") && digits[0] != '0'
}

// parseDecimal is the arbitrary-precision path of parseQuantity.
func parseDecimal(p quantityParts, base, exp int32, format quantityFormat) (quantity, error) {
	d, ok := parseDecString(p.value)
	if !ok {
		return quantity{}, errQuantityNumeric
	}
	if base == 10 {
		d.scale -= exp
	} else {
		d.unscaled.Lsh(d.unscaled, uint(exp))
	}
	neg := d.unscaled.Sign() < 0
	d.unscaled.Abs(d.unscaled)
	if d.unscaled.Sign() != 0 {
		r, _, err := d.roundedUp(nanoScale)
		if err != nil {
			return quantity{}, err
		}
		d = r
	}
	if format == binarySI && d.cmp(maxInt64Dec()) > 0 {
		d = maxInt64Dec()
	}
	if format == binarySI && d.sign() > 0 && d.cmp(decAmount{unscaled: big.NewInt(1)}) < 0 {
		format = decimalSI
	}
	if neg {
		d = d.neg()
	}
	return quantity{dec: &d, format: format}, nil
}

func maxInt64Dec() decAmount {
	return decAmount{unscaled: big.NewInt(math.MaxInt64)}
}

// parseDecString reads an optionally signed decimal number with an optional
// point ("+1.5", "-.5", "1."), keeping every written fraction digit in the
// scale, as inf.Dec.SetString does.
func parseDecString(s string) (decAmount, bool) {
	digits := s
	if digits != "" && (digits[0] == '+' || digits[0] == '-') {
		digits = digits[1:]
	}
	var scale int32
	if i := strings.IndexByte(digits, '.'); i >= 0 {
		scale = int32(len(digits) - i - 1)
		digits = digits[:i] + digits[i+1:]
	}
	if digits == "" || skipDigits(digits, 0) != len(digits) {
		return decAmount{}, false
	}
	u, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return decAmount{}, false
	}
	if s[0] == '-' {
		u.Neg(u)
	}
	return decAmount{unscaled: u, scale: scale}, true
}
