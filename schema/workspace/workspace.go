// Package workspace is the record of workspaces, their pixels and their API keys
// (lib/apikey.Key), held in Redis: the
// hot-path state the edge and the read API authenticate against. Secrets are stored only
// as SHA-256 digests; a secret is shown once, when created or rotated.
//
// Redis layout (prefix "svc:"):
//
//	svc:ws:<uuid>            JSON Workspace
//	svc:ws:<uuid>:keys       set of key ids
//	svc:ws:<uuid>:pixels     set of pixel ids
//	svc:pixel:<uuid>         JSON Pixel
//	svc:key:<uuid>           JSON apikey.Key (the key record, without secrets)
//	svc:secret:<sha256 hex>  JSON apikey.Secret: which key a digest opens, and its cutover
//
// No name has a hash tag: every command touches one record, so in a Redis Cluster the
// records of different workspaces, pixels and keys spread over every master.
package workspace

import (
	"time"

	"github.com/google/uuid"
)

// Workspace is an organisation's workspace. A showroom workspace holds demonstration
// data and is the only kind a sandbox key may be bound to.
type Workspace struct {
	ID        uuid.UUID `json:"id"`
	Name      string    `json:"name"`
	Showroom  bool      `json:"showroom"`
	CreatedAt time.Time `json:"created_at"`
	// TimeZone is the IANA zone whose days the workspace's rollups are ("" is UTC).
	TimeZone string `json:"time_zone,omitempty"`
}

// Pixel is a tracking pixel of a workspace.
type Pixel struct {
	ID          uuid.UUID `json:"id"`
	WorkspaceID uuid.UUID `json:"workspace_id"`
	Name        string    `json:"name"`
	Showroom    bool      `json:"showroom"`
	CreatedAt   time.Time `json:"created_at"`
	// TimeZone overrides the workspace's zone for this pixel's rollups ("" inherits it).
	// Store.Pixel caches records for good: read the zone with Store.TimeZone.
	TimeZone string `json:"time_zone,omitempty"`
}
