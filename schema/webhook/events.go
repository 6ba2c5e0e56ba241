package webhook

import "time"

// Event kinds delivered to outbound endpoints (payloads in webhooks/README.md).
const (
	KindDayClosed        = "rollup.day_closed"
	KindKeyExpiring      = "key.expiring"
	KindErasureCompleted = "erasure.completed"
	// The pixel alerts (webhooks/alerts.go), each sent when it starts and when it clears.
	KindRejectionsRising = "pixel.rejections_rising"
	KindPixelSilent      = "pixel.silent"
)

// Kinds lists every outbound event kind.
var Kinds = []string{KindDayClosed, KindKeyExpiring, KindErasureCompleted, KindRejectionsRising, KindPixelSilent}

// Envelope is the JSON body of every delivery.
type Envelope struct {
	ID              string    `json:"id"`
	IDUUID          string    `json:"id_uuid"`
	Type            string    `json:"type"`
	CreatedAt       time.Time `json:"created_at"`
	WorkspaceID     string    `json:"workspace_id"`
	WorkspaceIDUUID string    `json:"workspace_id_uuid"`
	Data            any       `json:"data"`
}
