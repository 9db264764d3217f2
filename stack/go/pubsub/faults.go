package main

// The fault switches and counters, kept per project (intercept.go applies them to
// the calls). Every resource name of the API starts with projects/<p>/, so a
// test that uses a project of its own (a unique name) flips switches that no
// other test sees, even when test runs share one server.

import (
	"context"
	"fmt"
	"log"
	"path"
	"sort"
	"strings"
	"sync"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Switches are a project's faults; the zero value is normal service.
type Switches struct {
	// DropAcks: Acknowledge answers OK and acknowledges nothing, so the
	// messages come back once their leases expire.
	DropAcks bool `json:"drop_acks"`
	// DropModacks: lease extensions (modifyAckDeadline > 0) answer OK and
	// extend nothing, so leases expire at their current deadline. Nacks
	// (deadline 0) still take effect.
	DropModacks bool `json:"drop_modacks"`
	// Unavailable: every RPC fails with UNAVAILABLE, open streaming pulls end.
	Unavailable bool `json:"unavailable"`
	// Fail: method name -> gRPC status code name, e.g. {"Acknowledge": "INTERNAL"}:
	// every call of that method fails with that code.
	Fail map[string]string `json:"fail"`
}

// subStats counts what one subscription's clients did; leases maps the message
// ID of each delivered, unacknowledged message to its latest ack ID.
type subStats struct {
	Delivered      int `json:"delivered"`
	Redelivered    int `json:"redelivered"`
	Acked          int `json:"acked"`
	AcksStale      int `json:"acks_stale"`
	AcksDropped    int `json:"acks_dropped"`
	Modacks        int `json:"modacks"`
	ModacksDropped int `json:"modacks_dropped"`
	Nacks          int `json:"nacks"`
	Expired        int `json:"expired"`
	Unacked        int `json:"unacked"`
	leases         map[string]string
}

type project struct {
	switches Switches
	subs     map[string]*subStats
	refused  map[string]int
}

// Stats is what GET /projects/<p>/stats answers.
type Stats struct {
	Project       string               `json:"project"`
	Faults        Switches             `json:"faults"`
	Subscriptions map[string]*subStats `json:"subscriptions"`
	Refused       map[string]int       `json:"refused"`
}

type faults struct {
	fake     *pstest.GServer
	mu       sync.Mutex
	projects map[string]*project
	changed  chan struct{} // closed (and replaced) whenever a switch changes
}

func newFaults(fake *pstest.GServer) *faults {
	return &faults{fake: fake, projects: map[string]*project{}, changed: make(chan struct{})}
}

// projectOf returns p of "projects/p/...", or "" for any other name.
func projectOf(name string) string {
	parts := strings.SplitN(name, "/", 3)
	if len(parts) < 2 || parts[0] != "projects" {
		return ""
	}
	return parts[1]
}

// shortName returns the last segment of a resource name.
func shortName(name string) string { return path.Base(name) }

// parseAckID returns the message ID of a pstest ack ID ("<message id>:<delivery>").
func parseAckID(ackID string) string {
	if i := strings.LastIndex(ackID, ":"); i >= 0 {
		return ackID[:i]
	}
	return ackID
}

// requestProject finds the project a request is about from its resource name.
func requestProject(req any) string {
	message, ok := req.(proto.Message)
	if !ok {
		return ""
	}
	reflected := message.ProtoReflect()
	fields := reflected.Descriptor().Fields()
	for _, name := range []protoreflect.Name{"subscription", "topic", "project", "name", "snapshot", "parent"} {
		field := fields.ByName(name)
		if field != nil && field.Kind() == protoreflect.StringKind && !field.IsList() {
			if p := projectOf(reflected.Get(field).String()); p != "" {
				return p
			}
		}
	}
	return ""
}

// must be called with mu held.
func (f *faults) project(name string) *project {
	p := f.projects[name]
	if p == nil {
		p = &project{subs: map[string]*subStats{}, refused: map[string]int{}}
		f.projects[name] = p
	}
	return p
}

// must be called with mu held.
func (f *faults) sub(subscription string) *subStats {
	p := f.project(projectOf(subscription))
	s := p.subs[shortName(subscription)]
	if s == nil {
		s = &subStats{leases: map[string]string{}}
		p.subs[shortName(subscription)] = s
	}
	return s
}

// refusal is the error a call of method in project must fail with, or nil.
func (f *faults) refusal(projectName, method string) error {
	if projectName == "" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.projects[projectName]
	if p == nil {
		return nil
	}
	code, failing := codes.OK, false
	if p.switches.Unavailable {
		code, failing = codes.Unavailable, true
	} else if name, ok := p.switches.Fail[method]; ok {
		code, failing = parseCode(name)
	}
	if !failing {
		return nil
	}
	p.refused[method+":"+code.String()]++
	return status.Errorf(code, "injected by the stack's pubsub fault switches (project %s)", projectName)
}

func parseCode(name string) (codes.Code, bool) {
	var code codes.Code
	if err := code.UnmarshalJSON([]byte(`"` + strings.ToUpper(name) + `"`)); err != nil {
		return codes.OK, false
	}
	return code, code != codes.OK
}

// delivered records messages sent to a subscription's client.
func (f *faults) delivered(subscription string, messages []*pb.ReceivedMessage) {
	if len(messages) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sub(subscription)
	for _, m := range messages {
		id := m.GetMessage().GetMessageId()
		if _, again := s.leases[id]; again {
			s.Redelivered++
		}
		s.Delivered++
		s.leases[id] = m.GetAckId()
	}
}

// acks records acknowledgements; false when they are to be dropped.
func (f *faults) acks(subscription string, ackIDs []string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sub(subscription)
	if f.project(projectOf(subscription)).switches.DropAcks {
		s.AcksDropped += len(ackIDs)
		return false
	}
	for _, ackID := range ackIDs {
		id := parseAckID(ackID)
		if s.leases[id] == ackID {
			delete(s.leases, id)
			s.Acked++
		} else {
			s.AcksStale++ // pstest ignores an ack of an older delivery too
		}
	}
	return true
}

// modacks records deadline changes and returns those to apply.
func (f *faults) modacks(subscription string, ackIDs []string, seconds []int32) ([]string, []int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sub(subscription)
	drop := f.project(projectOf(subscription)).switches.DropModacks
	var keptIDs []string
	var keptSeconds []int32
	for i, ackID := range ackIDs {
		switch {
		case seconds[i] == 0:
			s.Nacks++
		case drop:
			s.ModacksDropped++
			continue
		default:
			s.Modacks++
		}
		keptIDs, keptSeconds = append(keptIDs, ackID), append(keptSeconds, seconds[i])
	}
	return keptIDs, keptSeconds
}

// changes returns a channel closed at the next switch change.
func (f *faults) changes() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// must be called with mu held.
func (f *faults) announce() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Patch is a partial update of a project's switches: the fields given change.
type Patch struct {
	DropAcks    *bool              `json:"drop_acks"`
	DropModacks *bool              `json:"drop_modacks"`
	Unavailable *bool              `json:"unavailable"`
	Fail        *map[string]string `json:"fail"`
}

var methods = func() map[string]bool {
	known := map[string]bool{}
	services := pb.File_google_pubsub_v1_pubsub_proto.Services()
	for i := 0; i < services.Len(); i++ {
		for j := 0; j < services.Get(i).Methods().Len(); j++ {
			known[string(services.Get(i).Methods().Get(j).Name())] = true
		}
	}
	return known
}()

func (patch Patch) validate() error {
	if patch.Fail == nil {
		return nil
	}
	for method, code := range *patch.Fail {
		if !methods[method] {
			return fmt.Errorf("fail: no method %q in google.pubsub.v1 Publisher or Subscriber", method)
		}
		if _, ok := parseCode(code); !ok {
			return fmt.Errorf("fail.%s: %q is not a gRPC status code name other than OK", method, code)
		}
	}
	return nil
}

func (f *faults) set(projectName string, patch Patch) error {
	if err := patch.validate(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switches := &f.project(projectName).switches
	if patch.DropAcks != nil {
		switches.DropAcks = *patch.DropAcks
	}
	if patch.DropModacks != nil {
		switches.DropModacks = *patch.DropModacks
	}
	if patch.Unavailable != nil {
		switches.Unavailable = *patch.Unavailable
	}
	if patch.Fail != nil {
		switches.Fail = *patch.Fail
	}
	log.Printf("project %s: faults %+v", projectName, *switches)
	f.announce()
	return nil
}

// reset turns a project's switches off and zeroes its counters; the leases of
// delivered, unacknowledged messages are kept, since those messages still are.
func (f *faults) reset(projectName string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.project(projectName)
	p.switches = Switches{}
	p.refused = map[string]int{}
	for _, s := range p.subs {
		*s = subStats{leases: s.leases}
	}
	log.Printf("project %s: faults and counters reset", projectName)
	f.announce()
}

// expire ends every lease of the project's delivered, unacknowledged messages
// now (of one subscription, if named), as if their ack deadlines had passed:
// pstest delivers them again, with new ack IDs. Returns how many.
func (f *faults) expire(ctx context.Context, projectName, only string) (int, error) {
	f.mu.Lock()
	pending := map[string][]string{}
	for name, s := range f.project(projectName).subs {
		if only != "" && name != only {
			continue
		}
		for _, ackID := range s.leases {
			pending[name] = append(pending[name], ackID)
		}
	}
	f.mu.Unlock()
	expired := 0
	for name, ackIDs := range pending {
		sort.Strings(ackIDs)
		full := "projects/" + projectName + "/subscriptions/" + name
		req := &pb.ModifyAckDeadlineRequest{Subscription: full, AckIds: ackIDs, AckDeadlineSeconds: 0}
		if _, err := f.fake.ModifyAckDeadline(ctx, req); err != nil && status.Code(err) != codes.NotFound {
			return expired, fmt.Errorf("expiring the leases of %s: %w", full, err)
		}
		f.mu.Lock()
		f.sub(full).Expired += len(ackIDs)
		f.mu.Unlock()
		expired += len(ackIDs)
	}
	log.Printf("project %s: expired %d lease(s)", projectName, expired)
	return expired, nil
}

func (f *faults) stats(projectName string) Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.project(projectName)
	subs := map[string]*subStats{}
	for name, s := range p.subs {
		snapshot := *s
		snapshot.Unacked = len(s.leases)
		subs[name] = &snapshot
	}
	refused := map[string]int{}
	for key, n := range p.refused {
		refused[key] = n
	}
	switches := p.switches
	if switches.Fail == nil {
		switches.Fail = map[string]string{}
	}
	return Stats{Project: projectName, Faults: switches, Subscriptions: subs, Refused: refused}
}

// forget resets the project and deletes its subscriptions and topics.
func (f *faults) forget(ctx context.Context, projectName string) (topics, subscriptions int, err error) {
	parent := "projects/" + projectName
	subs, err := f.fake.ListSubscriptions(ctx, &pb.ListSubscriptionsRequest{Project: parent, PageSize: 1 << 20})
	if err != nil {
		return 0, 0, err
	}
	for _, s := range subs.Subscriptions {
		if _, err := f.fake.DeleteSubscription(ctx, &pb.DeleteSubscriptionRequest{Subscription: s.Name}); err == nil {
			subscriptions++
		}
	}
	tops, err := f.fake.ListTopics(ctx, &pb.ListTopicsRequest{Project: parent, PageSize: 1 << 20})
	if err != nil {
		return 0, subscriptions, err
	}
	for _, t := range tops.Topics {
		if _, err := f.fake.DeleteTopic(ctx, &pb.DeleteTopicRequest{Topic: t.Name}); err == nil {
			topics++
		}
	}
	f.mu.Lock()
	delete(f.projects, projectName)
	f.announce()
	f.mu.Unlock()
	log.Printf("project %s: forgotten (%d topics, %d subscriptions deleted)", projectName, topics, subscriptions)
	return topics, subscriptions, nil
}
