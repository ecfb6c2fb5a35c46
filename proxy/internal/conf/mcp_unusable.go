package conf

// joinNonEmpty joins a and b with "; ", leaving out an empty one.
func JoinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
