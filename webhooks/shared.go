package webhooks

import (
	"errors"

	"svc/schema/webhook"
)

// The names this role has always used for what it shares with the application, now
// defined in schema/webhook (the floor below both): endpoints, inbound secrets, events
// and the delivery schedule in Redis, the ClickHouse logs, the egress policy.
type (
	Endpoint       = webhook.Endpoint
	EndpointSecret = webhook.EndpointSecret
	InboundSecret  = webhook.InboundSecret
	Claim          = webhook.Claim
	Delivery       = webhook.Delivery
	Envelope       = webhook.Envelope
	Logs           = webhook.Logs
	InboundRow     = webhook.InboundRow
	DeliveryRow    = webhook.DeliveryRow
	DeliveryFilter = webhook.DeliveryFilter
	StoredEvent    = webhook.StoredEvent
	Egress         = webhook.Egress
	AddressError   = webhook.AddressError
)

// Kinds and outcomes (schema/webhook).
const (
	KindDayClosed        = webhook.KindDayClosed
	KindKeyExpiring      = webhook.KindKeyExpiring
	KindErasureCompleted = webhook.KindErasureCompleted
	KindRejectionsRising = webhook.KindRejectionsRising
	KindPixelSilent      = webhook.KindPixelSilent

	Processed = webhook.Processed
	Ignored   = webhook.Ignored
	Failed    = webhook.Failed

	Delivered = webhook.Delivered
	Retry     = webhook.Retry
	GaveUp    = webhook.GaveUp
	Disabled  = webhook.Disabled
	Dropped   = webhook.Dropped

	EventTTL = webhook.EventTTL
)

var (
	// Kinds lists every outbound event kind.
	Kinds = webhook.Kinds
	// ErrNotFound is returned for an endpoint, event or delivery that does not exist.
	ErrNotFound = webhook.ErrNotFound
	// ErrInFlight is returned by Redeliver for a delivery an attempt is being made on.
	ErrInFlight = webhook.ErrInFlight
	// NewLogs returns Logs over a ClickHouse connection.
	NewLogs = webhook.NewLogs
	// ValidateURL checks an endpoint URL.
	ValidateURL = webhook.ValidateURL
	// NewSecret returns a new signing secret.
	NewSecret = webhook.NewSecret
)

// refused returns the *AddressError err carries, or nil.
func refused(err error) *AddressError {
	var ae *AddressError
	if errors.As(err, &ae) {
		return ae
	}
	return nil
}
