package library

import "testing"

func TestSmoke(t *testing.T) {
	run(t, []evalCase{
		{expr: `[1, 2, 3].isSorted()`, want: true},
		{expr: `quantity("50k").add(20).sub(quantity("100k")).sub(-50000) == quantity("20")`, want: true},
		{expr: `url('https://example.com:80/').getHost()`, want: "example.com:80"},
		{expr: `cidr('192.168.0.0/24').containsIP('192.168.0.1')`, want: true},
		{expr: `format.dns1123Label().validate("my-name") == optional.none()`, want: true},
		{expr: `semver('1.2.3').major()`, want: 1},
		{expr: `"abc 123".find('[0-9]+')`, want: "123"},
		{expr: `sign(quantity("-1"))`, want: -1},
		{expr: `ip.isCanonical('2001:db8::abcd')`, want: true},
	})
}
