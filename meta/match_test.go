package meta

import (
	"regexp"
	"testing"
)

// The matchers accept exactly what the formats' regular expressions accept.
func FuzzNameMatchers(f *testing.F) {
	res := []struct {
		name  string
		re    *regexp.Regexp
		match func(string) bool
	}{
		{"dns1123Label", regexp.MustCompile("^" + dns1123LabelFmt + "$"), matchDNS1123Label},
		{"dns1123Subdomain", regexp.MustCompile("^" + dns1123SubdomainFmt + "$"), matchDNS1123Subdomain},
		{"dns1035Label", regexp.MustCompile("^" + dns1035LabelFmt + "$"), matchDNS1035Label},
		{"qualifiedName", regexp.MustCompile("^" + qualifiedNameFmt + "$"), matchQualifiedName},
		{"labelValue", regexp.MustCompile("^" + labelValueFmt + "$"), matchLabelValue},
	}
	for _, s := range []string{"", "a", "-", "a-b", "a.b", "a..b", ".a", "a.", "A", "0a", "a_b", "a-", "x.y-z.0", "é", "a\nb", "Ab.c_D-9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, r := range res {
			if got, want := r.match(s), r.re.MatchString(s); got != want {
				t.Errorf("%s(%q) = %v, the regular expression says %v", r.name, s, got, want)
			}
		}
	})
}
