package apiserver

import (
	"context"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// SelfSubjectReview (authentication.k8s.io/v1, the body of `kubectl auth
// whoami`) is a virtual type the server registers itself: create-only, it
// answers the requesting user as the authenticator resolved it.

// selfSubjectReview is authentication.k8s.io/v1 SelfSubjectReview.
type selfSubjectReview struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Status        struct {
		UserInfo userInfo `json:"userInfo" doc:"The user who made the request."`
	} `json:"status,omitempty" doc:"Filled in by the server: the user's attributes."`
}

type userInfo struct {
	Username string              `json:"username,omitempty" doc:"The name that uniquely identifies this user among all active users."`
	UID      string              `json:"uid,omitempty" doc:"A unique value that identifies this user across time."`
	Groups   []string            `json:"groups,omitempty" doc:"The names of groups this user is a part of."`
	Extra    map[string][]string `json:"extra,omitempty" doc:"Any additional information provided by the authenticator."`
}

// ssrMessage is the protobuf message of SelfSubjectReview (kubectl auth
// whoami sends and reads protobuf).
var ssrMessage = func() *codec.Message {
	user := codec.MustMessage("UserInfo",
		codec.Field{Name: "username", Number: 1, Kind: codec.String}, codec.Field{Name: "uid", Number: 2, Kind: codec.String},
		codec.Field{Name: "groups", Number: 3, Kind: codec.String, Repeated: true},
		codec.Field{Name: "extra", Number: 4, Kind: codec.StringList, Map: true})
	status := codec.MustMessage("SelfSubjectReviewStatus", codec.Field{Name: "userInfo", Number: 1, Kind: codec.MessageKind, Message: user})
	return codec.MustMessage("SelfSubjectReview",
		codec.Field{Name: "metadata", Number: 1, Kind: codec.MessageKind, Message: codec.ObjectMetaMessage},
		codec.Field{Name: "status", Number: 2, Kind: codec.MessageKind, Message: status})
}()

// selfSubjectReviews is the registration of selfsubjectreviews.
func (s *Server) selfSubjectReviews() (registry.Resource, error) {
	return registry.ForType[selfSubjectReview](registry.Resource{
		Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews", Kind: "SelfSubjectReview",
		Protobuf: ssrMessage,
		Virtual:  &registry.Virtual{Create: reviewSelf},
	})
}

// reviewSelf answers "who am I?": the request's user, stamped with the
// time of the answer as kube-apiserver does.
func reviewSelf(_ context.Context, req *registry.Request, _ registry.Object) (registry.Object, error) {
	if req.User == nil {
		return nil, meta.NewBadRequest("the request has no user")
	}
	var review selfSubjectReview
	review.Metadata.CreationTimestamp = meta.NewTime(time.Now())
	review.Status.UserInfo = userInfo{Username: req.User.Name, UID: req.User.UID, Groups: req.User.Groups, Extra: req.User.Extra}
	return toObject(review)
}
