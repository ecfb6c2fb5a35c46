package conf

func PathOrArgs(p string) string {
	if p == "" {
		return "(arguments)"
	}
	return p
}

// JoinNonEmpty joins a and b with "; ", leaving out an empty one.
func JoinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
