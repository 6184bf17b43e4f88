//lint:file-ignore ST1005 the messages are blang/semver's, which Kubernetes shows users verbatim.

package library

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// parseSemver parses a strict Semantic Versioning 2.0.0 version with the
// rules and error messages of github.com/blang/semver/v4, which Kubernetes'
// semver() reports verbatim.
func parseSemver(s string) (semverValue, error) {
	if s == "" {
		return semverValue{}, errors.New("Version string empty")
	}
	parts := strings.SplitN(s, ".", 3)
	if len(parts) != 3 {
		return semverValue{}, errors.New("No Major.Minor.Patch elements found")
	}
	var v semverValue
	var err error
	if v.major, err = versionNumber(parts[0], "major", "Major"); err != nil {
		return semverValue{}, err
	}
	if v.minor, err = versionNumber(parts[1], "minor", "Minor"); err != nil {
		return semverValue{}, err
	}
	patch, build, hasBuild := strings.Cut(parts[2], "+")
	patch, pre, hasPre := strings.Cut(patch, "-")
	if v.patch, err = versionNumber(patch, "patch", "Patch"); err != nil {
		return semverValue{}, err
	}
	if hasPre {
		for _, p := range strings.Split(pre, ".") {
			pr, err := parsePrerelease(p)
			if err != nil {
				return semverValue{}, err
			}
			v.pre = append(v.pre, pr)
		}
	}
	if hasBuild {
		for _, b := range strings.Split(build, ".") {
			if b == "" {
				return semverValue{}, errors.New("Build meta data is empty")
			}
			if !containsOnly(b, semverAlphanum) {
				return semverValue{}, fmt.Errorf("Invalid character(s) found in build meta data %q", b)
			}
			v.build = append(v.build, b)
		}
	}
	return v, nil
}

// versionNumber parses the major, minor or patch number.
func versionNumber(s, lower, title string) (uint64, error) {
	if !containsOnly(s, semverNumbers) {
		return 0, fmt.Errorf("Invalid character(s) found in %s number %q", lower, s)
	}
	if hasLeadingZero(s) {
		return 0, fmt.Errorf("%s number must not contain leading zeroes %q", title, s)
	}
	return strconv.ParseUint(s, 10, 64)
}

func parsePrerelease(s string) (prerelease, error) {
	switch {
	case s == "":
		return prerelease{}, errors.New("Prerelease is empty")
	case containsOnly(s, semverNumbers):
		if hasLeadingZero(s) {
			return prerelease{}, fmt.Errorf("Numeric PreRelease version must not contain leading zeroes %q", s)
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return prerelease{}, err
		}
		return prerelease{num: n, isNum: true}, nil
	case containsOnly(s, semverAlphanum):
		return prerelease{str: s}, nil
	}
	return prerelease{}, fmt.Errorf("Invalid character(s) found in prerelease %q", s)
}

func containsOnly(s, set string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return !strings.ContainsRune(set, r) }) == -1
}

func hasLeadingZero(s string) bool { return len(s) > 1 && s[0] == '0' }

// compare orders versions by major, minor and patch, then prerelease (a
// version without one is greater; numeric identifiers sort before
// alphanumeric ones); build metadata is ignored.
func (v semverValue) compare(o semverValue) int {
	if c := cmp.Compare(v.major, o.major); c != 0 {
		return c
	}
	if c := cmp.Compare(v.minor, o.minor); c != 0 {
		return c
	}
	if c := cmp.Compare(v.patch, o.patch); c != 0 {
		return c
	}
	switch {
	case len(v.pre) == 0 && len(o.pre) == 0:
		return 0
	case len(v.pre) == 0:
		return 1
	case len(o.pre) == 0:
		return -1
	}
	for i := 0; i < len(v.pre) && i < len(o.pre); i++ {
		if c := v.pre[i].compare(o.pre[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(v.pre), len(o.pre))
}

func (p prerelease) compare(o prerelease) int {
	switch {
	case p.isNum && !o.isNum:
		return -1
	case !p.isNum && o.isNum:
		return 1
	case p.isNum:
		return cmp.Compare(p.num, o.num)
	}
	return strings.Compare(p.str, o.str)
}
