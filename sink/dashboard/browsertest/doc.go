// Package browsertest loads toolgate's failure dashboard in headless
// Chromium (TestBrowser), and attacks a real sidecar's admin listener from
// a page of another site (TestBrowserAdminCrossSite). It is a module of its own, like deploy/k8s, so
// chromedp, the browser driver, stays out of toolgate's go.mod and off the
// binary's dependency list; `make test` runs it with the other nested
// modules. It shares its fixtures with the dashboard's own tests through
// sink/dashboard/internal/dashtest.
package browsertest
