package library

import (
	"testing"
	"time"
)

func TestLists(t *testing.T) {
	run(t, []evalCase{
		// Kubernetes' documentation and library examples.
		{expr: `[1, 2, 3].isSorted()`, want: true},
		{expr: `['a', 'b', 'b', 'c'].isSorted()`, want: true},
		{expr: `[2.0, 1.0].isSorted()`, want: false},
		{expr: `[1].isSorted()`, want: true},
		{expr: `[].isSorted()`, want: true},
		{expr: `['names', 'sorted'].isSorted()`, want: true},
		{expr: `[1, 3].sum()`, want: 4},
		{expr: `[1.0, 3.0].sum()`, want: 4.0},
		{expr: `[duration('1m'), duration('1s')].sum()`, want: time.Minute + time.Second},
		{expr: `[1u, 2u].sum()`, want: uint64(3)},
		{expr: `[].sum()`, want: 0},
		{expr: `[{'weight': 0.5}, {'weight': 0.5}].map(x, x.weight).sum() == 1.0`, want: true},
		{expr: `[1, 3].min()`, want: 1},
		{expr: `[1, 3].max()`, want: 3},
		{expr: `[1].min()`, want: 1},
		{expr: `([0] + []).min()`, want: 0},
		{expr: `['b', 'a', 'c'].max()`, want: "c"},
		{expr: `[1, 2].max() < [3, 4].min()`, want: true},
		{expr: `[1, 2, 2, 3].indexOf(2)`, want: 1},
		{expr: `['a', 'b', 'b', 'c'].lastIndexOf('b')`, want: 2},
		{expr: `[1.0].indexOf(1.1)`, want: -1},
		{expr: `[].indexOf('string')`, want: -1},
		{expr: `['should-be-first', 'x'].indexOf('should-be-first') == 0`, want: true},
		// The strings library's indexOf still applies to strings.
		{expr: `'abcb'.lastIndexOf('b')`, want: 3},
		// Errors.
		{expr: `[].min()`, evalErr: `^min called on empty list$`},
		{expr: `[].max()`, evalErr: `^max called on empty list$`},
		{expr: `[9223372036854775807, 1].sum()`, evalErr: `integer overflow`},
		{expr: `[{'a': 1}].isSorted()`, compileErr: `found no matching overload for 'isSorted'`},
		{expr: `['a'].sum()`, compileErr: `found no matching overload for 'sum'`},
		// includes is a 1.37 function, not in 1.36.
		{expr: `[1, 2].includes(2)`, compileErr: `undeclared reference to 'includes'`},
	})
}

func TestRegex(t *testing.T) {
	run(t, []evalCase{
		{expr: `"abc 123".find('[0-9]+')`, want: "123"},
		{expr: `"abc 123".find('[0-9]*')`, want: ""},
		{expr: `"abc 123".find('xyz')`, want: ""},
		{expr: `"123 abc 456".findAll('[0-9]+')`, want: []string{"123", "456"}},
		{expr: `"123 abc 456".findAll('[0-9]+', 1)`, want: []string{"123"}},
		{expr: `"123 abc 456".findAll('[0-9]+', 0)`, want: []string{}},
		{expr: `"123 abc 456".findAll('[0-9]+', -1)`, want: []string{"123", "456"}},
		{expr: `"123 abc 456".findAll('xyz')`, want: []string{}},
		{expr: `"1, 2, 3, 4".findAll('[0-9]+').map(x, int(x)).sum() < 100`, want: true},
		// A computed pattern is compiled per call.
		{expr: `"abc".find('[' + 'b]')`, want: "b"},
		{expr: `"abc".find('[' + '')`, evalErr: `^Illegal regex: error parsing regexp: missing closing \]`},
		{expr: `"abc".findAll('(' + '', 2)`, evalErr: `^Illegal regex: error parsing regexp: missing closing \)`},
		// A constant one when the program is built.
		{expr: `"abc".find('[')`, compileErr: `missing closing \]`},
	})
}

func TestURLs(t *testing.T) {
	run(t, []evalCase{
		{expr: `isURL('https://user:pass@example.com:80/path?query=val#fragment')`, want: true},
		{expr: `isURL('/absolute-path')`, want: true},
		{expr: `isURL('https://a:b:c/')`, want: false},
		{expr: `isURL('../relative-path')`, want: false},
		{expr: `url('/path').getScheme()`, want: ""},
		{expr: `url('https://example.com/').getScheme()`, want: "https"},
		{expr: `url('https://example.com:80/').getHost()`, want: "example.com:80"},
		{expr: `url('https://example.com/').getHost()`, want: "example.com"},
		{expr: `url('https://[::1]:80/').getHost()`, want: "[::1]:80"},
		{expr: `url('https://[::1]/').getHost()`, want: "[::1]"},
		{expr: `url('/path').getHost()`, want: ""},
		{expr: `url('https://example.com:80/').getHostname()`, want: "example.com"},
		{expr: `url('https://127.0.0.1:80/').getHostname()`, want: "127.0.0.1"},
		{expr: `url('https://[::1]:80/').getHostname()`, want: "::1"},
		{expr: `url('/path').getHostname()`, want: ""},
		{expr: `url('https://example.com:80/').getPort()`, want: "80"},
		{expr: `url('https://example.com/').getPort()`, want: ""},
		{expr: `url('/path').getPort()`, want: ""},
		{expr: `url('https://example.com/path').getEscapedPath()`, want: "/path"},
		{expr: `url('https://example.com/path with spaces/').getEscapedPath()`, want: "/path%20with%20spaces/"},
		{expr: `url('https://example.com').getEscapedPath()`, want: ""},
		{expr: `url('https://example.com/path?k1=a&k2=b&k2=c').getQuery()`, want: map[string][]string{"k1": {"a"}, "k2": {"b", "c"}}},
		{expr: `url('https://example.com/path?key with spaces=value with spaces').getQuery()`, want: map[string][]string{"key with spaces": {"value with spaces"}}},
		{expr: `url('https://example.com/path?').getQuery()`, want: map[string][]string{}},
		{expr: `url('https://example.com/path').getQuery()`, want: map[string][]string{}},
		{expr: `url('https://example.com/p#frag').getEscapedPath()`, want: "/p"},
		{expr: `url('https://example.com/a') == url('https://example.com/a')`, want: true},
		{expr: `url('https://example.com/a') == url('https://example.com/b')`, want: false},
		{expr: `type(url('/a')) == type(url('/b'))`, want: true},
		{expr: `url('https://a:b:c/')`, evalErr: `^URL parse error during conversion from string: parse "https://a:b:c/": invalid port ":b:c" after host$`},
		{expr: `url('../relative-path')`, evalErr: `^URL parse error during conversion from string: parse "../relative-path": invalid URI for request$`},
		{expr: `url(1)`, compileErr: `found no matching overload for 'url'`},
	})
}
