package conf

func PathOrArgs(p string) string {
	if p == "" {
		return "(arguments)"
	}
	return p
}
