package catalog_test

import (
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"

	"svc/schema/catalog"
)

// TestReadmeImportExample keeps the documented import file valid.
func TestReadmeImportExample(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), "## Import file")
	_, rest, _ = strings.Cut(rest, "```json\n")
	doc, _, _ := strings.Cut(rest, "```")
	d, err := catalog.ParseDocument([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	bt, errs := d.Resolve(uuid.New())
	if len(errs) > 0 {
		t.Fatalf("README example: %v", errs)
	}
	if len(bt.Plans) != 1 || len(bt.Lines) != 1 || len(bt.PlanActuals) != 1 || len(bt.Campaigns) != 1 ||
		len(bt.CampaignActuals) != 1 || len(bt.Findings) != 1 || bt.Account == nil || len(bt.PlanRefs) != 0 {
		t.Fatalf("README example resolved to %+v", bt)
	}
}
