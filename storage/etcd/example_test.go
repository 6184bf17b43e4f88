package etcd_test

import (
	"context"
	"log"
	"time"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/storage/etcd"
)

// Open a store on an etcd cluster and serve an API from it. Several
// processes doing the same over one prefix form one API; the Elector makes
// the in-process controllers run on one of them at a time. (Not run: it
// needs an etcd server.)
func ExampleOpen() {
	ctx := context.Background()
	tlsConfig, err := etcd.LoadTLS("/etc/kapi/etcd-ca.crt", "/etc/kapi/etcd-client.crt", "/etc/kapi/etcd-client.key")
	if err != nil {
		log.Fatal(err)
	}
	store, err := etcd.Open(ctx, etcd.Options{
		Endpoints:          []string{"https://etcd-0.example:2379", "https://etcd-1.example:2379", "https://etcd-2.example:2379"},
		TLS:                tlsConfig,
		Prefix:             "/my-api/",
		CompactionInterval: 5 * time.Minute,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	api, err := apiserver.New(ctx, apiserver.Config{
		Storage: store,
		Elector: store.Elector(etcd.ElectorOptions{}),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer api.Close()
	// Serve api with an http.Server, as in the apiserver package's examples.
}
