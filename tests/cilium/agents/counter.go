package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// counter counts the agents' requests by verb, resource and status code
// ("PUT ciliumidentities 409"), as the server answered them: the tests read
// how many marks Cilium's code stripped and how many of those met a conflict.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func newCounter() *counter { return &counter{n: map[string]int{}} }

func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		status := "error"
		if err == nil {
			status = fmt.Sprint(resp.StatusCode)
		}
		verb := req.Method
		if req.URL.Query().Get("watch") == "true" {
			verb = "WATCH"
		}
		c.mu.Lock()
		c.n[verb+" "+resource(req.URL.Path)+" "+status]++
		c.mu.Unlock()
		return resp, err
	})
}

func (c *counter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resource is the plural resource name of an API path:
// /api/v1/namespaces/ns/pods/x -> pods, /apis/cilium.io/v2/ciliumidentities/1 -> ciliumidentities.
func resource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	i := 2 // api/v1/<resource>
	if len(parts) > 0 && parts[0] == "apis" {
		i = 3 // apis/<group>/<version>/<resource>
	}
	if len(parts) > i+1 && parts[i] == "namespaces" {
		i += 2
	}
	if len(parts) > i {
		return parts[i]
	}
	return path
}
