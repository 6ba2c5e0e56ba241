package apikey

import (
	"time"

	"svc/lib/ids"
)

// JSON is a key as GET /me and `svc admin key …` print it; Secret only on create and
// rotate.
type JSON struct {
	ID                string     `json:"id"`
	IDUUID            string     `json:"id_uuid"`
	Secret            string     `json:"secret,omitempty"`
	WorkspaceID       string     `json:"workspace_id"`
	WorkspaceIDUUID   string     `json:"workspace_id_uuid"`
	Env               string     `json:"env"`
	Scopes            []string   `json:"scopes"`
	ExpiresAt         *time.Time `json:"expires_at"`
	Allow             []string   `json:"allow"`
	Version           string     `json:"version,omitempty"`
	Burst             int        `json:"burst"`
	Daily             int        `json:"daily"`
	Status            string     `json:"status"`
	CreatedAt         time.Time  `json:"created_at"`
	RevokedAt         *time.Time `json:"revoked_at,omitempty"`
	PreviousCutoverAt *time.Time `json:"previous_cutover_at,omitempty"`
}

// NewJSON formats k as of now.
func NewJSON(k Key, now time.Time) JSON {
	allow := make([]string, len(k.Allow))
	for i, p := range k.Allow {
		allow[i] = p.String()
	}
	status := "active"
	if k.RevokedAt != nil {
		status = "revoked"
	} else if k.ExpiresAt != nil && !now.Before(*k.ExpiresAt) {
		status = "expired"
	}
	return JSON{ID: ids.Format(ids.Key, k.ID), IDUUID: k.ID.String(), WorkspaceID: ids.Format(ids.Org, k.WorkspaceID),
		WorkspaceIDUUID: k.WorkspaceID.String(), Env: k.Env, Scopes: k.Scopes, ExpiresAt: k.ExpiresAt, Allow: allow,
		Version: k.Version, Burst: k.Burst, Daily: k.Daily, Status: status, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}
