package codec

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string exactly as encoding/json
// writes it with HTML escaping on: <, >, &, U+2028 and U+2029 escaped,
// invalid UTF-8 replaced by U+FFFD. Eight bytes at a time where nothing
// needs escaping.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while none needs a look.
		i = skipSafeWords(s, i)
		if i == len(s) {
			break
		}
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// SWAR constants: a one and a top bit in every byte of a word.
const (
	swarOnes = 0x0101010101010101
	swarTops = 0x8080808080808080
)

// load8 reads the eight bytes of w as a little-endian word. w is sliced to
// exactly eight bytes by the caller, so the compiler proves every index in
// bounds and makes this one load (with the indexes into a longer string it
// checked each byte's bounds and loaded them one by one).
func load8(w string) uint64 {
	_ = w[7]
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// skipSafeWords returns the index, from i on, of the first eight bytes of
// s that may need escaping, or of the tail shorter than eight. A loop of its
// own keeps the word test's constants and index in registers.
func skipSafeWords(s string, i int) int {
	for i+8 <= len(s) && !mayNeedEscape(load8(s[i:i+8])) {
		i += 8
	}
	return i
}

// mayNeedEscape reports whether one of the eight bytes of x may need
// AppendJSONString's attention: a control character, '"', '\\', '<', '>',
// '&' or a byte of a multi-byte character. It has no false negatives (false
// positives only send the bytes through the exact loop).
//
// Each zero-byte test (v-1)&^v finds the bytes equal to one value; setting
// bit 1 maps '<' (0x3c) and only it onto '>' (0x3e), and setting bit 2 maps
// '"' (0x22) and only it onto '&' (0x26), so three tests cover the five
// characters, and the function is small enough to be inlined.
func mayNeedEscape(x uint64) bool {
	lt := x | swarOnes*0x02 ^ swarOnes*'>'
	qa := x | swarOnes*0x04 ^ swarOnes*'&'
	bs := x ^ swarOnes*'\\'
	t := x | (x-swarOnes*0x20)&^x | (lt-swarOnes)&^lt | (qa-swarOnes)&^qa | (bs-swarOnes)&^bs
	return t&swarTops != 0
}
