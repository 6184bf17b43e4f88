package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/meta"
)

// TestMaxInFlightUnderLoad sends many concurrent creates over loopback to a
// server allowing 2 mutating requests in flight: every answer is 201 or a
// well-formed 429 (reason TooManyRequests, Retry-After: 1), some are each,
// and exactly the accepted objects exist afterwards.
func TestMaxInFlightUnderLoad(t *testing.T) {
	ts := securedServer(t, nil, func(c *Config) {
		c.FlowControl.Levels = []PriorityLevel{{Name: "all", Seats: 2, SeatsPerFlow: 2, QueueLength: -1}}
		c.Authorizer = auth.AuthorizerFunc(func(_ context.Context, a auth.Attributes) (auth.Decision, string, error) {
			if a.Verb == "create" {
				// Keep each create inside the limit a little, so that
				// concurrent ones overlap even on a fast machine.
				time.Sleep(2 * time.Millisecond)
			}
			return auth.Allow, "", nil
		})
	})
	const clients, each = 32, 8
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()

	var mu sync.Mutex
	codes := map[int]int{}
	var problems []string
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				body := fmt.Sprintf(`{"metadata":{"name":"cm-%d-%d"}}`, i, j)
				req, err := http.NewRequest("POST", ts.URL+cmPath, strings.NewReader(body))
				if err != nil {
					panic(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer admin-token")
				resp, err := client.Do(req)
				if err != nil {
					mu.Lock()
					problems = append(problems, err.Error())
					mu.Unlock()
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				problem := ""
				switch {
				case err != nil:
					problem = "reading body: " + err.Error()
				case resp.StatusCode == http.StatusCreated:
				case resp.StatusCode == http.StatusTooManyRequests:
					var st meta.Status
					if err := json.Unmarshal(b, &st); err != nil || st.Reason != meta.StatusReasonTooManyRequests || resp.Header.Get("Retry-After") != "1" {
						problem = fmt.Sprintf("malformed 429: Retry-After %q, body %s", resp.Header.Get("Retry-After"), b)
					}
				default:
					problem = fmt.Sprintf("unexpected %d: %s", resp.StatusCode, b)
				}
				mu.Lock()
				codes[resp.StatusCode]++
				if problem != "" {
					problems = append(problems, problem)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(problems) > 0 {
		t.Fatalf("%d problems, first: %s (codes %v)", len(problems), problems[0], codes)
	}
	if codes[http.StatusCreated] == 0 || codes[http.StatusTooManyRequests] == 0 {
		t.Fatalf("codes = %v, want both 201 and 429", codes)
	}
	r := do(t, ts, "GET", cmPath, "", bearer("admin-token")...)
	if r.code != http.StatusOK {
		t.Fatalf("list: %d %s", r.code, r.body)
	}
	items, _ := r.object(t)["items"].([]any)
	if len(items) != codes[http.StatusCreated] {
		t.Fatalf("%d configmaps stored, %d creates answered 201", len(items), codes[http.StatusCreated])
	}
	t.Logf("codes: %v", codes)
}
