// Package patch implements kapi's four PATCH mechanisms over generic JSON
// objects (map[string]any, see package meta), and the field ownership that
// server-side apply is built on:
//
//   - JSON Patch (RFC 6902, application/json-patch+json), on
//     github.com/evanphx/json-patch/v5: see JSONPatch;
//   - JSON Merge Patch (RFC 7386, application/merge-patch+json), on generic
//     values, as that library merges: see Merge and MergePatch;
//   - Strategic Merge Patch (application/strategic-merge-patch+json), driven
//     by the type's structural schema: see Strategic and
//     DeclaresStrategicMerge;
//   - Server-Side Apply (application/apply-patch+yaml) and the
//     metadata.managedFields every write records, on
//     sigs.k8s.io/structured-merge-diff: see FieldManager.
//
// Errors are *Error (a malformed patch, or one that cannot apply to the
// object) or, for apply conflicts, a *meta.StatusError with code 409 that can
// be sent to the client as it is.
package patch
