package codec

// Messages wire-compatible with Kubernetes' k8s.io/apimachinery meta/v1 (and
// the few other built-in messages kapi serves), written from the field
// numbers of their generated.proto files. They are descriptions, immutable
// after package initialisation.
var (
	// OwnerReferenceMessage is meta/v1 OwnerReference.
	OwnerReferenceMessage = MustMessage("OwnerReference",
		Field{Name: "apiVersion", Number: 5, Kind: String, Keep: true},
		Field{Name: "kind", Number: 1, Kind: String, Keep: true},
		Field{Name: "name", Number: 3, Kind: String, Keep: true},
		Field{Name: "uid", Number: 4, Kind: String, Keep: true},
		Field{Name: "controller", Number: 6, Kind: Bool, Keep: true},
		Field{Name: "blockOwnerDeletion", Number: 7, Kind: Bool, Keep: true},
	)

	// ManagedFieldsEntryMessage is meta/v1 ManagedFieldsEntry; fieldsV1 is
	// a FieldsV1 message carrying the JSON of the field set.
	ManagedFieldsEntryMessage = MustMessage("ManagedFieldsEntry",
		Field{Name: "manager", Number: 1, Kind: String},
		Field{Name: "operation", Number: 2, Kind: String},
		Field{Name: "apiVersion", Number: 3, Kind: String},
		Field{Name: "time", Number: 4, Kind: Time},
		Field{Name: "fieldsType", Number: 6, Kind: String},
		Field{Name: "fieldsV1", Number: 7, Kind: RawJSON},
		Field{Name: "subresource", Number: 8, Kind: String},
	)

	// ObjectMetaMessage is meta/v1 ObjectMeta.
	ObjectMetaMessage = MustMessage("ObjectMeta",
		Field{Name: "name", Number: 1, Kind: String},
		Field{Name: "generateName", Number: 2, Kind: String},
		Field{Name: "namespace", Number: 3, Kind: String},
		Field{Name: "selfLink", Number: 4, Kind: String},
		Field{Name: "uid", Number: 5, Kind: String},
		Field{Name: "resourceVersion", Number: 6, Kind: String},
		Field{Name: "generation", Number: 7, Kind: Int64},
		Field{Name: "creationTimestamp", Number: 8, Kind: Time},
		Field{Name: "deletionTimestamp", Number: 9, Kind: Time},
		Field{Name: "deletionGracePeriodSeconds", Number: 10, Kind: Int64, Keep: true},
		Field{Name: "labels", Number: 11, Kind: String, Map: true},
		Field{Name: "annotations", Number: 12, Kind: String, Map: true},
		Field{Name: "ownerReferences", Number: 13, Kind: MessageKind, Message: OwnerReferenceMessage, Repeated: true},
		Field{Name: "finalizers", Number: 14, Kind: String, Repeated: true},
		Field{Name: "managedFields", Number: 17, Kind: MessageKind, Message: ManagedFieldsEntryMessage, Repeated: true},
	)

	// ListMetaMessage is meta/v1 ListMeta.
	ListMetaMessage = MustMessage("ListMeta",
		Field{Name: "selfLink", Number: 1, Kind: String},
		Field{Name: "resourceVersion", Number: 2, Kind: String},
		Field{Name: "continue", Number: 3, Kind: String},
		Field{Name: "remainingItemCount", Number: 4, Kind: Int64, Keep: true},
		Field{Name: "shardInfo", Number: 5, Kind: MessageKind, Message: MustMessage("ShardInfo",
			Field{Name: "selector", Number: 1, Kind: String})},
	)

	// StatusCauseMessage is meta/v1 StatusCause.
	StatusCauseMessage = MustMessage("StatusCause",
		Field{Name: "reason", Number: 1, Kind: String},
		Field{Name: "message", Number: 2, Kind: String},
		Field{Name: "field", Number: 3, Kind: String},
	)

	// StatusDetailsMessage is meta/v1 StatusDetails.
	StatusDetailsMessage = MustMessage("StatusDetails",
		Field{Name: "name", Number: 1, Kind: String},
		Field{Name: "group", Number: 2, Kind: String},
		Field{Name: "kind", Number: 3, Kind: String},
		Field{Name: "uid", Number: 6, Kind: String},
		Field{Name: "causes", Number: 4, Kind: MessageKind, Message: StatusCauseMessage, Repeated: true},
		Field{Name: "retryAfterSeconds", Number: 5, Kind: Int32},
	)

	// StatusMessage is meta/v1 Status.
	StatusMessage = MustMessage("Status",
		Field{Name: "metadata", Number: 1, Kind: MessageKind, Message: ListMetaMessage},
		Field{Name: "status", Number: 2, Kind: String},
		Field{Name: "message", Number: 3, Kind: String},
		Field{Name: "reason", Number: 4, Kind: String},
		Field{Name: "details", Number: 5, Kind: MessageKind, Message: StatusDetailsMessage},
		Field{Name: "code", Number: 6, Kind: Int32},
	)

	// PartialObjectMetadataMessage is meta/v1 (and v1beta1)
	// PartialObjectMetadata: an object's metadata alone.
	PartialObjectMetadataMessage = MustMessage("PartialObjectMetadata",
		Field{Name: "metadata", Number: 1, Kind: MessageKind, Message: ObjectMetaMessage},
	)

	// PartialObjectMetadataListMessage is meta/v1 PartialObjectMetadataList.
	PartialObjectMetadataListMessage = MustMessage("PartialObjectMetadataList",
		Field{Name: "metadata", Number: 1, Kind: MessageKind, Message: ListMetaMessage},
		Field{Name: "items", Number: 2, Kind: MessageKind, Message: PartialObjectMetadataMessage, Repeated: true},
	)

	// PartialObjectMetadataListV1beta1Message is meta/v1beta1
	// PartialObjectMetadataList, whose field numbers are the other way round.
	PartialObjectMetadataListV1beta1Message = MustMessage("PartialObjectMetadataList",
		Field{Name: "metadata", Number: 2, Kind: MessageKind, Message: ListMetaMessage},
		Field{Name: "items", Number: 1, Kind: MessageKind, Message: PartialObjectMetadataMessage, Repeated: true},
	)

	// DeleteOptionsMessage is meta/v1 DeleteOptions, the body of a delete.
	DeleteOptionsMessage = MustMessage("DeleteOptions",
		Field{Name: "gracePeriodSeconds", Number: 1, Kind: Int64, Keep: true},
		Field{Name: "preconditions", Number: 2, Kind: MessageKind, Message: MustMessage("Preconditions",
			Field{Name: "uid", Number: 1, Kind: String, Keep: true},
			Field{Name: "resourceVersion", Number: 2, Kind: String, Keep: true})},
		Field{Name: "orphanDependents", Number: 3, Kind: Bool, Keep: true},
		Field{Name: "propagationPolicy", Number: 4, Kind: String, Keep: true},
		Field{Name: "dryRun", Number: 5, Kind: String, Repeated: true},
		Field{Name: "ignoreStoreReadErrorWithClusterBreakingPotential", Number: 6, Kind: Bool, Keep: true},
	)

	// ScaleMessage is autoscaling/v1 Scale, the /scale subresource.
	ScaleMessage = MustMessage("Scale",
		Field{Name: "metadata", Number: 1, Kind: MessageKind, Message: ObjectMetaMessage},
		Field{Name: "spec", Number: 2, Kind: MessageKind, Message: MustMessage("ScaleSpec",
			Field{Name: "replicas", Number: 1, Kind: Int32})},
		Field{Name: "status", Number: 3, Kind: MessageKind, Message: MustMessage("ScaleStatus",
			Field{Name: "replicas", Number: 1, Kind: Int32, Keep: true},
			Field{Name: "selector", Number: 2, Kind: String})},
	)
)

// ListOf returns the message of a Kubernetes list of item: ListMeta
// metadata = 1, repeated items = 2 (ConfigMapList, NamespaceList, ...).
func ListOf(item *Message) *Message {
	return MustMessage(item.name+"List",
		Field{Name: "metadata", Number: 1, Kind: MessageKind, Message: ListMetaMessage},
		Field{Name: "items", Number: 2, Kind: MessageKind, Message: item, Repeated: true},
	)
}
