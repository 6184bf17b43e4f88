package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/storage/badger"
)

func TestEmbeddedService(t *testing.T) {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	svc, err := newService(context.Background(), slog.New(slog.DiscardHandler), store, map[string]auth.User{"t": {Name: "tester"}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.api.Close()
	ts := httptest.NewServer(svc.router)
	defer ts.Close()

	call := func(method, path, body, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// The service's own routes are untouched.
	if code, body := call("GET", "/", "", ""); code != 200 || body != "the shop\n" {
		t.Fatalf("own route: %d %q", code, body)
	}
	if code, _ := call("POST", "/orders", "", ""); code != 202 {
		t.Fatalf("own POST route: %d", code)
	}
	// The API lives under /kube and needs a token.
	products := "/kube/apis/shop.example.com/v1/namespaces/default/products"
	if code, _ := call("GET", products, "", ""); code != 401 {
		t.Fatalf("unauthenticated list: %d, want 401", code)
	}
	code, body := call("POST", products, `{"apiVersion":"shop.example.com/v1","kind":"Product","metadata":{"name":"mug"},"spec":{"title":"Mug","priceCents":1200}}`, "t")
	if code != 201 || !strings.Contains(body, `"currency":"EUR"`) {
		t.Fatalf("create product (defaulted currency): %d %s", code, body)
	}
	code, body = call("POST", products, `{"apiVersion":"shop.example.com/v1","kind":"Product","metadata":{"name":"odd"},"spec":{"title":"Odd","priceCents":1201,"currency":"USD"}}`, "t")
	if code != 422 || !strings.Contains(body, "multiples of 5 cents") {
		t.Fatalf("typed validation hook: %d %s", code, body)
	}
	code, body = call("GET", "/kube/apis/shop.example.com/v1", "", "t")
	if code != 200 || !strings.Contains(body, `"shortNames":["prod"]`) {
		t.Fatalf("discovery under the prefix: %d %s", code, body)
	}
	// One metrics registry carries both the service's and kapi's metrics.
	code, body = call("GET", "/metrics", "", "")
	if code != 200 || !strings.Contains(body, "shop_orders_total 1") ||
		!strings.Contains(body, `apiserver_request_total{code="201",component="apiserver",group="shop.example.com",resource="products"`) {
		t.Fatalf("shared metrics: %d\n%s", code, body)
	}
}
