package meta

// VersionLess orders Kubernetes versions by priority: GA > beta > alpha,
// then by number (v1 < v2, v1beta1 < v1beta2), as discovery lists a group's
// versions (highest first; the first is the preferred version).
func VersionLess(a, b string) bool {
	pa, pb := versionPriority(a), versionPriority(b)
	if pa != pb {
		for i := range pa {
			if pa[i] != pb[i] {
				return pa[i] < pb[i]
			}
		}
	}
	return a < b
}

func versionPriority(v string) [3]int {
	var major, minor int
	stage := 3 // GA
	i := 1
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		major = major*10 + int(v[i]-'0')
		i++
	}
	rest := v[i:]
	switch {
	case len(rest) >= 4 && rest[:4] == "beta":
		stage, rest = 2, rest[4:]
	case len(rest) >= 5 && rest[:5] == "alpha":
		stage, rest = 1, rest[5:]
	}
	for j := 0; j < len(rest); j++ {
		minor = minor*10 + int(rest[j]-'0')
	}
	return [3]int{stage, major, minor}
}
