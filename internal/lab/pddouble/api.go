package pddouble

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// pdServiceName is the gRPC name of the pdpb.PD service.
const pdServiceName = "pdpb.PD"

// missingMethods are the pdpb.PD methods an API version does not have.
func missingMethods(api string) map[string]bool {
	if api == APIv75 {
		// BatchScanRegions came with PD v8.
		return map[string]bool{"/" + pdServiceName + "/BatchScanRegions": true}
	}
	return nil
}

// refuseMethods turns the named methods away before any handler runs, with
// the status gRPC gives a method its server does not know: the stream is
// ended with Unimplemented and "unknown method M for service S", and its
// request is never read, exactly as by a server built without the method.
func refuseMethods(missing map[string]bool) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if !missing[info.FullMethodName] {
			return ctx, nil
		}
		svc, method, _ := strings.Cut(strings.TrimPrefix(info.FullMethodName, "/"), "/")
		return ctx, status.Errorf(codes.Unimplemented, "unknown method %v for service %v", method, svc)
	}
}
