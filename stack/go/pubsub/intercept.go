package main

// The gRPC interceptors that apply a project's switches (faults.go) to the calls
// pstest serves, and report what clients did to the counters.

import (
	"context"
	"path"
	"sync/atomic"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// unary applies the switches to a unary call and counts what it did.
func (f *faults) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := f.refusal(requestProject(req), path.Base(info.FullMethod)); err != nil {
		return nil, err
	}
	switch r := req.(type) {
	case *pb.AcknowledgeRequest:
		if !f.acks(r.Subscription, r.AckIds) {
			return &emptypb.Empty{}, nil
		}
	case *pb.ModifyAckDeadlineRequest:
		seconds := make([]int32, len(r.AckIds))
		for i := range seconds {
			seconds[i] = r.AckDeadlineSeconds
		}
		kept, _ := f.modacks(r.Subscription, r.AckIds, seconds)
		if len(kept) < len(r.AckIds) {
			if len(kept) == 0 {
				return &emptypb.Empty{}, nil
			}
			r.AckIds = kept
		}
	}
	resp, err := handler(ctx, req)
	if r, ok := req.(*pb.PullRequest); ok && err == nil {
		f.delivered(r.Subscription, resp.(*pb.PullResponse).GetReceivedMessages())
	}
	return resp, err
}

// stream applies the switches to a streaming pull: the requests' acks and
// modacks as for the unary calls, and Unavailable (or a failing StreamingPull)
// ends an open stream at once, as a server going away would.
func (f *faults) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	watched := &watchedStream{ServerStream: ss, faults: f, method: path.Base(info.FullMethod)}
	watched.subscription.Store(new(string))
	done := make(chan error, 1)
	go func() { done <- handler(srv, watched) }()
	for {
		changed := f.changes()
		if err := f.refusal(projectOf(watched.sub()), watched.method); err != nil {
			return err
		}
		select {
		case err := <-done:
			return err
		case <-changed:
		}
	}
}

type watchedStream struct {
	grpc.ServerStream
	faults       *faults
	method       string
	subscription atomic.Pointer[string]
}

func (w *watchedStream) sub() string { return *w.subscription.Load() }

func (w *watchedStream) RecvMsg(m any) error {
	if err := w.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	req, ok := m.(*pb.StreamingPullRequest)
	if !ok {
		return nil
	}
	if req.Subscription != "" && w.sub() == "" {
		name := req.Subscription
		w.subscription.Store(&name)
	}
	sub := w.sub()
	if err := w.faults.refusal(projectOf(sub), w.method); err != nil {
		return err
	}
	if len(req.AckIds) > 0 && !w.faults.acks(sub, req.AckIds) {
		req.AckIds = nil
	}
	if len(req.ModifyDeadlineAckIds) > 0 {
		if len(req.ModifyDeadlineAckIds) != len(req.ModifyDeadlineSeconds) {
			return status.Error(codes.InvalidArgument, "modify_deadline_ack_ids and modify_deadline_seconds differ in length")
		}
		req.ModifyDeadlineAckIds, req.ModifyDeadlineSeconds = w.faults.modacks(sub, req.ModifyDeadlineAckIds, req.ModifyDeadlineSeconds)
	}
	return nil
}

func (w *watchedStream) SendMsg(m any) error {
	err := w.ServerStream.SendMsg(m)
	if resp, ok := m.(*pb.StreamingPullResponse); ok {
		// Counted even if the send failed: pstest holds the message leased.
		w.faults.delivered(w.sub(), resp.GetReceivedMessages())
	}
	return err
}
