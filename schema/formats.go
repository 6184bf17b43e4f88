package schema

import (
	"encoding/base64"
	"net"
	"regexp"
	"strings"
	"time"
)

var (
	uuidRE     = regexp.MustCompile(`^(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$`)
	hostnameRE = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)*\.?$`)
)

// dateTimeLayouts are the layouts accepted for format date-time.
var dateTimeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999Z0700",
	"2006-01-02T15:04:05",
	"2006-01-02T15:04:05.999999999",
}

// checkFormat reports whether s is valid for a string format. Formats this
// package does not know are accepted.
func checkFormat(format, s string) bool {
	switch format {
	case "date-time", "datetime":
		for _, l := range dateTimeLayouts {
			if _, err := time.Parse(l, s); err == nil {
				return true
			}
		}
		return false
	case "date":
		_, err := time.Parse("2006-01-02", s)
		return err == nil
	case "byte":
		_, err := base64.StdEncoding.DecodeString(s)
		return err == nil
	case "uuid":
		return uuidRE.MatchString(s)
	case "ipv4":
		ip := net.ParseIP(s)
		return ip != nil && ip.To4() != nil && !strings.Contains(s, ":")
	case "ipv6":
		ip := net.ParseIP(s)
		return ip != nil && strings.Contains(s, ":")
	case "cidr":
		_, _, err := net.ParseCIDR(s)
		return err == nil
	case "hostname":
		return len(s) <= 255 && hostnameRE.MatchString(s)
	case "duration":
		_, err := time.ParseDuration(s)
		return err == nil
	}
	return true
}
