package meta

// Hand-written matchers for the name formats validated on every write. They
// accept exactly what the regular expressions in validation.go accept (a
// fuzz test holds them to it) at a fraction of the cost.

func isLowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

func isAlnum(c byte) bool { return isLowerAlnum(c) || 'A' <= c && c <= 'Z' }

// matchDNS1123Label matches [a-z0-9]([-a-z0-9]*[a-z0-9])?
func matchDNS1123Label(s string) bool {
	if s == "" || !isLowerAlnum(s[0]) || !isLowerAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; c != '-' && !isLowerAlnum(c) {
			return false
		}
	}
	return true
}

// matchDNS1123Subdomain matches DNS-1123 labels joined by dots.
func matchDNS1123Subdomain(s string) bool {
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if !matchDNS1123Label(s[start:i]) {
				return false
			}
			start = i + 1
		}
	}
	return true
}

// matchDNS1035Label matches [a-z]([-a-z0-9]*[a-z0-9])?
func matchDNS1035Label(s string) bool {
	return s != "" && 'a' <= s[0] && s[0] <= 'z' && matchDNS1123Label(s)
}

// matchQualifiedName matches ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]
func matchQualifiedName(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; c != '-' && c != '_' && c != '.' && !isAlnum(c) {
			return false
		}
	}
	return true
}

// matchLabelValue matches an empty string or a qualified name.
func matchLabelValue(s string) bool { return s == "" || matchQualifiedName(s) }
