package client

// WireEvent is wireEvent, for the tests of package client_test.
type WireEvent = wireEvent
