package library

import "testing"

func TestSemver(t *testing.T) {
	run(t, []evalCase{
		{expr: `isSemver('1.0.0')`, want: true},
		{expr: `isSemver('0.1.0-alpha.1')`, want: true},
		{expr: `isSemver('1.0.0+build.1')`, want: true},
		{expr: `isSemver('hello')`, want: false},
		{expr: `isSemver('v1.0')`, want: false},
		{expr: `isSemver('v1.0', true)`, want: true},
		{expr: `isSemver('1.0', true)`, want: true},
		{expr: `isSemver('01.01.01', true)`, want: true},
		{expr: `isSemver('1.0-alpha', true)`, want: false},
		{expr: `semver('v1.0.0', true) == semver('1.0.0')`, want: true},
		{expr: `semver('1.0', true) == semver('1.0.0')`, want: true},
		{expr: `semver('01.01.01', true) == semver('1.1.1')`, want: true},
		{expr: `semver('1.2.3').major()`, want: 1},
		{expr: `semver('1.2.3').minor()`, want: 2},
		{expr: `semver('1.2.3').patch()`, want: 3},
		{expr: `semver("1.2.3").compareTo(semver("1.2.3"))`, want: 0},
		{expr: `semver("1.2.3").compareTo(semver("2.0.0"))`, want: -1},
		{expr: `semver("1.2.3").compareTo(semver("0.1.2"))`, want: 1},
		{expr: `semver('1.2.3').compareTo(semver('2.0.0')) < 0`, want: true},
		{expr: `semver('1.0.0-alpha').isLessThan(semver('1.0.0'))`, want: true},
		{expr: `semver('1.0.0-alpha.1').isLessThan(semver('1.0.0-alpha.beta'))`, want: true},
		{expr: `semver('1.0.0-2').isLessThan(semver('1.0.0-10'))`, want: true},
		{expr: `semver('1.0.0-alpha').isLessThan(semver('1.0.0-alpha.1'))`, want: true},
		{expr: `semver('2.0.0').isGreaterThan(semver('1.9.9'))`, want: true},
		{expr: `semver('1.0.0+a') == semver('1.0.0+b')`, want: true},
		{expr: `semver('200K')`, evalErr: `^No Major.Minor.Patch elements found$`},
		{expr: `semver('Three')`, evalErr: `^No Major.Minor.Patch elements found$`},
		{expr: `semver('01.0.0')`, evalErr: `^Major number must not contain leading zeroes "01"$`},
		{expr: `semver('1.x.0')`, evalErr: `^Invalid character\(s\) found in minor number "x"$`},
		{expr: `semver('1.0.0-01')`, evalErr: `^Numeric PreRelease version must not contain leading zeroes "01"$`},
		{expr: `semver('1.0.0-a..b')`, evalErr: `^Prerelease is empty$`},
		{expr: `semver('1.0.0+a_b')`, evalErr: `^Invalid character\(s\) found in build meta data "a_b"$`},
		{expr: `semver('')`, evalErr: `^Version string empty$`},
		{expr: `semver('1.0-alpha', true)`, evalErr: `^short version cannot contain PreRelease/Build meta data$`},
		{expr: `semver('1..0')`, evalErr: `^strconv.ParseUint: parsing "": invalid syntax$`},
		{expr: `semver(1)`, compileErr: `found no matching overload for 'semver'`},
	})
}
