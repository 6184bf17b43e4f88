package apiserver

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

// Allocation budgets of the read paths, which are deterministic enough to
// count (a count, not a time: it does not depend on the machine). A change
// that makes gets or list items allocate more fails here; raise a budget
// only with a reason. The benchmarks (bench_test.go) show the same counts
// with -benchmem.
func TestHotPathAllocationBudgets(t *testing.T) {
	api := newConfigMapServer(t, Config{})
	for i := 0; i < 1000; i++ {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest("POST", cmPath, strings.NewReader(fmt.Sprintf(`{"metadata":{"name":"cm-%04d","labels":{"app":"x"}},"data":{"v":%q}}`, i, benchValue))))
		if rec.Code != 201 {
			t.Fatalf("create: %d %s", rec.Code, rec.Body)
		}
	}
	measure := func(path string) float64 {
		return testing.AllocsPerRun(50, func() {
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			if rec.Code != 200 {
				t.Fatalf("GET %s: %d", path, rec.Code)
			}
		})
	}
	get := measure(cmPath + "/cm-0042")
	list100 := measure(cmPath + "?limit=100")
	list1000 := measure(cmPath + "?limit=1000")
	perItem := (list1000 - list100) / 900
	t.Logf("allocations: get %.0f, list of 100 %.0f, list of 1000 %.0f (%.2f per item)", get, list100, list1000, perItem)
	if budget := 55.0; get > budget {
		t.Errorf("a get allocates %.0f times, budget %.0f", get, budget)
	}
	if budget := 8.0; perItem > budget {
		t.Errorf("a list allocates %.2f times per item, budget %.0f", perItem, budget)
	}
	// A create of a 2 KiB configmap, end to end (storage included: one write
	// at a time, so one write per group commit). The budget holds what keeps
	// it low: managedFields computed directly (patch.FieldManager) and written
	// as JSON text, the body read into one buffer, validation messages built
	// only on errors, decoding and pruning with path stacks, a lazy request
	// deadline and the request resolved once.
	n := 0
	create := testing.AllocsPerRun(200, func() {
		n++
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest("POST", cmPath, strings.NewReader(fmt.Sprintf(`{"metadata":{"name":"new-%04d","labels":{"app":"x"}},"data":{"v":%q}}`, n, benchValue))))
		if rec.Code != 201 {
			t.Fatalf("create: %d %s", rec.Code, rec.Body)
		}
	})
	t.Logf("allocations: create %.0f", create)
	if budget := 160.0; create > budget {
		t.Errorf("a create allocates %.0f times, budget %.0f", create, budget)
	}
}
