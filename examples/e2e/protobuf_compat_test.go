package e2e

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
)

// protoObject is a generated Kubernetes type.
type protoObject interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// fullMeta sets every ObjectMeta field.
func fullMeta() metav1.ObjectMeta {
	yes, grace := true, int64(30)
	ts := metav1.NewTime(time.Date(2026, 11, 22, 1, 2, 3, 0, time.UTC))
	return metav1.ObjectMeta{
		Name: "n", GenerateName: "n-", Namespace: "ns", UID: types.UID("u-1"), ResourceVersion: "42", Generation: 7,
		CreationTimestamp: ts, DeletionTimestamp: &ts, DeletionGracePeriodSeconds: &grace,
		Labels: map[string]string{"a": "1", "b.c/d": ""}, Annotations: map[string]string{"note": "café \"q\""},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: "ns", UID: "u-0", Controller: &yes, BlockOwnerDeletion: &yes}},
		Finalizers:      []string{"f1", "example.dev/f2"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", Time: &ts,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:data":{".":{},"f:a":{}}}`), Subresource: "status"}},
	}
}

// checkBothWays checks that kapi's message reads what the generated type
// writes (as the same JSON), and writes what the generated type reads.
func checkBothWays(t *testing.T, name string, msg *codec.Message, in protoObject, fresh func() protoObject) {
	t.Helper()
	pb, err := in.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := msg.Unmarshal(pb)
	if err != nil {
		t.Fatalf("%s: kapi cannot decode client-go's protobuf: %v", name, err)
	}
	wantJSON, _ := json.Marshal(in)
	var want map[string]any
	_ = json.Unmarshal(wantJSON, &want)
	delete(want, "kind")
	delete(want, "apiVersion")
	gotJSON, _ := json.Marshal(got)
	var gotNorm map[string]any
	_ = json.Unmarshal(gotJSON, &gotNorm)
	if !reflect.DeepEqual(gotNorm, want) {
		t.Errorf("%s: decoded\n got %s\nwant %s", name, gotJSON, wantJSON)
	}
	back, err := msg.AppendProtobuf(nil, wantJSON)
	if err != nil {
		t.Fatalf("%s: kapi cannot encode the JSON: %v", name, err)
	}
	out := fresh()
	if err := out.Unmarshal(back); err != nil {
		t.Fatalf("%s: client-go cannot decode kapi's protobuf: %v", name, err)
	}
	if !apiequality.Semantic.DeepEqual(out, in) {
		a, _ := json.Marshal(out)
		t.Errorf("%s: client-go decoded\n got %s\nwant %s", name, a, wantJSON)
	}
}

// kapi's hand-written messages against the generated Go types of
// k8s.io/api and k8s.io/apimachinery, in both directions.
func TestProtobufWireCompatibility(t *testing.T) {
	t.Parallel()
	immutable := true
	cm := &corev1.ConfigMap{ObjectMeta: fullMeta(), Data: map[string]string{"a": "b", "empty": ""}, BinaryData: map[string][]byte{"bin": {0, 1, 255}}, Immutable: &immutable}
	checkBothWays(t, "ConfigMap", registry.ConfigMaps().Protobuf, cm, func() protoObject { return &corev1.ConfigMap{} })

	ts := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	ns := &corev1.Namespace{ObjectMeta: fullMeta(), Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating, Conditions: []corev1.NamespaceCondition{{Type: corev1.NamespaceDeletionContentFailure, Status: corev1.ConditionTrue, LastTransitionTime: ts, Reason: "R", Message: "M"}}}}
	checkBothWays(t, "Namespace", registry.Namespaces().Protobuf, ns, func() protoObject { return &corev1.Namespace{} })

	secret := &corev1.Secret{ObjectMeta: fullMeta(), Data: map[string][]byte{"bin": {0, 1, 255}, "empty": {}}, StringData: map[string]string{"s": "v"},
		Type: corev1.SecretTypeTLS, Immutable: &immutable}
	checkBothWays(t, "Secret", registry.Secrets().Protobuf, secret, func() protoObject { return &corev1.Secret{} })

	holder, dur, trans, strategy, preferred := "", int32(15), int32(0), coordinationv1.OldestEmulationVersion, "b"
	acquire, renew := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)), metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 6, 999999000, time.UTC))
	lease := &coordinationv1.Lease{ObjectMeta: fullMeta(), Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur,
		AcquireTime: &acquire, RenewTime: &renew, LeaseTransitions: &trans, Strategy: &strategy, PreferredHolder: &preferred}}
	checkBothWays(t, "Lease", registry.Leases().Protobuf, lease, func() protoObject { return &coordinationv1.Lease{} })

	// Both event views, every field set: their messages are the generated ones.
	micro := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC))
	ref := corev1.ObjectReference{Kind: "ConfigMap", Namespace: "ns", Name: "cm", UID: types.UID("u"), APIVersion: "v1", ResourceVersion: "7", FieldPath: "data"}
	related := corev1.ObjectReference{Kind: "Pod", Name: "p"}
	coreEvent := &corev1.Event{ObjectMeta: fullMeta(), InvolvedObject: ref, Reason: "R", Message: "M", Source: corev1.EventSource{Component: "c", Host: "h"},
		FirstTimestamp: ts, LastTimestamp: ts, Count: 3, Type: corev1.EventTypeWarning, EventTime: micro,
		Series: &corev1.EventSeries{Count: 2, LastObservedTime: micro}, Action: "A", Related: &related, ReportingController: "example.dev/c", ReportingInstance: "i"}
	checkBothWays(t, "Event", registry.Events(registry.EventOptions{})[0].Protobuf, coreEvent, func() protoObject { return &corev1.Event{} })
	v1Event := &eventsv1.Event{ObjectMeta: fullMeta(), EventTime: micro, Series: &eventsv1.EventSeries{Count: 2, LastObservedTime: micro},
		ReportingController: "example.dev/c", ReportingInstance: "i", Action: "A", Reason: "R", Regarding: ref, Related: &related, Note: "N",
		Type: corev1.EventTypeNormal, DeprecatedSource: corev1.EventSource{Component: "c", Host: "h"}, DeprecatedFirstTimestamp: ts, DeprecatedLastTimestamp: ts, DeprecatedCount: 3}
	checkBothWays(t, "events.k8s.io Event", registry.Events(registry.EventOptions{})[1].Protobuf, v1Event, func() protoObject { return &eventsv1.Event{} })

	rem := int64(3)
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "9", Continue: "tok", RemainingItemCount: &rem}, Items: []corev1.ConfigMap{*cm, {ObjectMeta: metav1.ObjectMeta{Name: "x"}}}}
	checkBothWays(t, "ConfigMapList", codec.ListOf(registry.ConfigMaps().Protobuf), list, func() protoObject { return &corev1.ConfigMapList{} })

	st := &metav1.Status{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Status: metav1.StatusFailure, Message: "m", Reason: metav1.StatusReasonInvalid, Code: 422,
		Details: &metav1.StatusDetails{Name: "n", Group: "g", Kind: "k", UID: "u", RetryAfterSeconds: 2, Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Message: "bad", Field: "spec.x"}}}}
	checkBothWays(t, "Status", codec.StatusMessage, st, func() protoObject { return &metav1.Status{} })

	pom := &metav1.PartialObjectMetadata{ObjectMeta: fullMeta()}
	checkBothWays(t, "PartialObjectMetadata", codec.PartialObjectMetadataMessage, pom, func() protoObject { return &metav1.PartialObjectMetadata{} })
	poml := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "5"}, Items: []metav1.PartialObjectMetadata{*pom}}
	checkBothWays(t, "PartialObjectMetadataList", codec.PartialObjectMetadataListMessage, poml, func() protoObject { return &metav1.PartialObjectMetadataList{} })
	pomlb := &metav1beta1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "5", Continue: "c"}, Items: []metav1.PartialObjectMetadata{*pom}}
	checkBothWays(t, "v1beta1 PartialObjectMetadataList", codec.PartialObjectMetadataListV1beta1Message, pomlb, func() protoObject { return &metav1beta1.PartialObjectMetadataList{} })

	grace, orphan, prop, uid, rv := int64(0), false, metav1.DeletePropagationForeground, types.UID("u"), "7"
	do := &metav1.DeleteOptions{GracePeriodSeconds: &grace, PropagationPolicy: &prop, DryRun: []string{"All"},
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}
	//lint:ignore SA1019 old clients still send it; its field number must be right
	do.OrphanDependents = &orphan
	checkBothWays(t, "DeleteOptions", codec.DeleteOptionsMessage, do, func() protoObject { return &metav1.DeleteOptions{} })

	sc := &autoscalingv1.Scale{ObjectMeta: fullMeta(), Spec: autoscalingv1.ScaleSpec{Replicas: 3}, Status: autoscalingv1.ScaleStatus{Replicas: 2, Selector: "app=x"}}
	checkBothWays(t, "Scale", codec.ScaleMessage, sc, func() protoObject { return &autoscalingv1.Scale{} })
}
