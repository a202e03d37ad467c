// refclient: the reference clients of the real-apiserver benchmark
// (benches/real.rs, issue 28). Standard library only; one HTTP/2
// connection, as kube clients use.
//
//	refclient -mode capacity  -inflight N -from A -to B   DELETE identities A..B-1,
//	    exactly N requests in flight, a 429 retried at once: what a priority
//	    level with N seats admits, at most.
//	refclient -mode list                                  the floor of a scan: page
//	    CiliumEndpoints and CiliumIdentities (limit 500, both at once, one
//	    keep-alive connection), reading only metadata.continue.
//	refclient -mode neighbour -rate R -duration D         a workload of the same
//	    priority level: R GETs per second of one identity, each 429 waited out
//	    (Retry-After) and retried up to 10 times, as client-go does.
//
// Both print one JSON object on stdout.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	server := flag.String("server", "", "https://127.0.0.1:PORT")
	token := flag.String("token", "", "bearer token")
	ca := flag.String("ca", "", "CA certificate file")
	mode := flag.String("mode", "capacity", "capacity or neighbour")
	inflight := flag.Int("inflight", 1, "requests in flight (capacity)")
	from := flag.Int("from", 0, "first identity to delete (capacity)")
	to := flag.Int("to", 0, "one past the last (capacity)")
	rate := flag.Float64("rate", 10, "requests per second (neighbour)")
	duration := flag.Duration("duration", 10*time.Second, "how long (neighbour)")
	get := flag.String("get", "", "identity the neighbour reads")
	kubeconfig := flag.String("kubeconfig", "", "read server, token and CA from this kubeconfig (its first of each)")
	flag.Parse()
	var pem []byte
	var err error
	if *kubeconfig != "" {
		*server, *token, pem, err = fromKubeconfig(*kubeconfig)
	} else {
		pem, err = os.ReadFile(*ca)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
	}, Timeout: 60 * time.Second}
	c := &kube{client: client, server: *server, token: *token}
	var out any
	switch *mode {
	case "capacity":
		out = capacity(c, *inflight, *from, *to)
	case "list":
		out = list(c)
	case "neighbour":
		out = neighbour(c, *rate, *duration, *get)
	default:
		fmt.Fprintln(os.Stderr, "unknown -mode", *mode)
		os.Exit(2)
	}
	json.NewEncoder(os.Stdout).Encode(out)
}

// fromKubeconfig reads the first server, token and CA (file or data) of a
// simple kubeconfig, line by line (no YAML library: standard library only).
func fromKubeconfig(path string) (string, string, []byte, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return "", "", nil, err
	}
	var server, token string
	var pem []byte
	for _, line := range strings.Split(string(text), "\n") {
		key, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		value = strings.Trim(strings.TrimSpace(value), `"`)
		switch {
		case !ok:
		case key == "server" && server == "":
			server = value
		case key == "token" && token == "":
			token = value
		case key == "certificate-authority-data" && pem == nil:
			pem, err = base64.StdEncoding.DecodeString(value)
		case key == "certificate-authority" && pem == nil:
			pem, err = os.ReadFile(value)
		}
		if err != nil {
			return "", "", nil, err
		}
	}
	return server, token, pem, nil
}

type kube struct {
	client *http.Client
	server string
	token  string
}

// do sends one request and returns its status and Retry-After (seconds).
func (k *kube) do(method, path string) (int, int, error) {
	req, _ := http.NewRequestWithContext(context.Background(), method, k.server+path, nil)
	req.Header.Set("Authorization", "Bearer "+k.token)
	req.Header.Set("Accept", "application/json")
	res, err := k.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	ra, _ := strconv.Atoi(res.Header.Get("Retry-After"))
	return res.StatusCode, ra, nil
}

const ids = "/apis/cilium.io/v2/ciliumidentities/"

type capacityResult struct {
	InFlight      int     `json:"inFlight"`
	Deleted       int64   `json:"deleted"`
	Throttled     int64   `json:"throttled"`
	Errors        int64   `json:"errors"`
	Seconds       float64 `json:"seconds"`
	RatePerSecond float64 `json:"ratePerSecond"`
}

// capacity deletes identities from..to-1; with -to 0, the first -from
// identities the server lists instead.
func capacity(k *kube, inflight, from, to int) capacityResult {
	var list []string
	if to == 0 {
		list = firstNames(k, from)
	} else {
		for i := from; i < to; i++ {
			list = append(list, strconv.Itoa(i))
		}
	}
	names := make(chan string, len(list))
	for _, n := range list {
		names <- n
	}
	close(names)
	var deleted, throttled, errors atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < inflight; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range names {
				for {
					code, _, err := k.do("DELETE", ids+n)
					if err == nil && code == 429 {
						throttled.Add(1)
						continue
					}
					if err == nil && code < 300 {
						deleted.Add(1)
					} else {
						errors.Add(1)
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	s := time.Since(start).Seconds()
	return capacityResult{inflight, deleted.Load(), throttled.Load(), errors.Load(), s, float64(deleted.Load()) / s}
}

// firstNames lists the names of the first n identities.
func firstNames(k *kube, n int) []string {
	req, _ := http.NewRequest("GET", k.server+ids[:len(ids)-1]+"?limit="+strconv.Itoa(n), nil)
	req.Header.Set("Authorization", "Bearer "+k.token)
	for {
		res, err := k.client.Do(req.Clone(context.Background()))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		var body struct {
			Items []struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			} `json:"items"`
		}
		err = json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if res.StatusCode != 200 || err != nil {
			continue // a hostile server: try again
		}
		var names []string
		for _, i := range body.Items {
			names = append(names, i.Metadata.Name)
		}
		return names
	}
}

type listResult struct {
	Pages   int     `json:"pages"`
	Items   int     `json:"items"`
	Seconds float64 `json:"seconds"`
}

// page lists path with limit 500 until the last page; returns pages, items.
func (k *kube) page(path string) (int, int, error) {
	cont, pages, items := "", 0, 0
	for {
		url := path + "?limit=500"
		if cont != "" {
			url += "&continue=" + cont
		}
		req, _ := http.NewRequest("GET", k.server+url, nil)
		req.Header.Set("Authorization", "Bearer "+k.token)
		req.Header.Set("Accept", "application/json")
		res, err := k.client.Do(req)
		if err != nil {
			return pages, items, err
		}
		var body struct {
			Metadata struct {
				Continue string `json:"continue"`
			} `json:"metadata"`
			Items []struct{} `json:"items"`
		}
		err = json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 {
			return pages, items, fmt.Errorf("%s: %d %v", url, res.StatusCode, err)
		}
		pages++
		items += len(body.Items)
		if body.Metadata.Continue == "" {
			return pages, items, nil
		}
		cont = body.Metadata.Continue
	}
}

func list(k *kube) listResult {
	start := time.Now()
	var wg sync.WaitGroup
	var r [2]listResult
	for i, path := range []string{"/apis/cilium.io/v2/ciliumendpoints", "/apis/cilium.io/v2/ciliumidentities"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, n, err := k.page(path)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			r[i] = listResult{Pages: p, Items: n}
		}()
	}
	wg.Wait()
	return listResult{r[0].Pages + r[1].Pages, r[0].Items + r[1].Items, time.Since(start).Seconds()}
}

type neighbourResult struct {
	Requests      int64   `json:"requests"`
	Throttled     int64   `json:"throttled"`
	GaveUp        int64   `json:"gaveUp"`
	WaitedSecs    float64 `json:"retryAfterWaitedSeconds"`
	MaxRetryAfter int64   `json:"maxRetryAfterSeconds"`
	Seconds       float64 `json:"seconds"`
}

func neighbour(k *kube, rate float64, d time.Duration, name string) neighbourResult {
	var requests, throttled, gaveUp, waitedMs, maxRA atomic.Int64
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	start := time.Now()
	for time.Since(start) < d {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			requests.Add(1)
			for try := 0; ; try++ {
				code, ra, err := k.do("GET", ids+name)
				if err != nil || code != 429 {
					return
				}
				throttled.Add(1)
				if int64(ra) > maxRA.Load() {
					maxRA.Store(int64(ra))
				}
				if try == 10 {
					gaveUp.Add(1)
					return
				}
				if ra < 1 {
					ra = 1
				}
				waitedMs.Add(int64(ra) * 1000)
				time.Sleep(time.Duration(ra) * time.Second)
			}
		}()
	}
	wg.Wait()
	return neighbourResult{requests.Load(), throttled.Load(), gaveUp.Load(), float64(waitedMs.Load()) / 1000, maxRA.Load(), time.Since(start).Seconds()}
}
