// Command clientdecode measures what kbench's informer-sync workload spends
// on the client side alone: decoding a list response into its Go structs
// (encoding/json into maps, as kbench does), with no server and no network.
// A sync cannot end before its client has decoded it, so this CPU time bounds
// how fast any server can make kbench's informer sync on the same machine.
//
//	curl -sk -A kbench -H "Authorization: Bearer $TOKEN" \
//	    "$SERVER/api/v1/configmaps?resourceVersion=0&limit=500" -o /tmp/list.json
//	go run ./bench/clientdecode -n 8 /tmp/list.json
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"syscall"
	"time"
)

// cmObj is the shape kbench decodes each configmap into.
type cmObj struct {
	Metadata struct {
		Name            string            `json:"name"`
		Namespace       string            `json:"namespace"`
		ResourceVersion string            `json:"resourceVersion"`
		UID             string            `json:"uid"`
		Labels          map[string]string `json:"labels"`
		Annotations     map[string]string `json:"annotations"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
}

type list struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
		Continue        string `json:"continue"`
	} `json:"metadata"`
	Items []*cmObj `json:"items"`
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	n := flag.Int("n", 8, "decodes")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: clientdecode [-n N] LIST.json")
		os.Exit(2)
	}
	body, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var cpus []time.Duration
	items := 0
	for range *n {
		c0 := cpuTime()
		var l list
		if err := json.NewDecoder(bytes.NewReader(body)).Decode(&l); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		store := make(map[string]*cmObj, len(l.Items)+64)
		for _, it := range l.Items {
			store[it.Metadata.Namespace+"/"+it.Metadata.Name] = it
		}
		cpus = append(cpus, cpuTime()-c0)
		items = len(store)
	}
	sort.Slice(cpus, func(i, j int) bool { return cpus[i] < cpus[j] })
	fmt.Printf("%d items, %d bytes: decode CPU min %v, median %v (%d decodes; includes the decoder's garbage collection)\n",
		items, len(body), cpus[0].Round(time.Millisecond), cpus[len(cpus)/2].Round(time.Millisecond), len(cpus))
}
