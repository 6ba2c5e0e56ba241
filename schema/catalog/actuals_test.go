package catalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/schema/catalog"
	"svc/schema/chtest"
)

func TestCampaignActualsRestatedThriceLastStands(t *testing.T) {
	_, conn := chtest.NewDB(t)
	ctx := context.Background()
	ws, other, cmp := uuid.New(), uuid.New(), uuid.New()
	day := time.Date(2026, 5, 4, 13, 0, 0, 0, time.UTC)
	for i := 1; i <= 3; i++ {
		row := catalog.CampaignActual{CampaignID: cmp, Date: day, Source: "test",
			Metrics: catalog.Metrics{Impressions: uint64(100 * i), Clicks: uint64(i), Spend: decimal.New(int64(i)*125, -2),
				Currency: "EUR", Conversions: uint64(i)}}
		if err := catalog.UpsertCampaignActuals(ctx, conn, ws, []catalog.CampaignActual{row}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := catalog.CampaignActuals(ctx, conn, ws, cmp, catalog.ActualsQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Impressions != 300 || got[0].Clicks != 3 || !got[0].Spend.Equal(decimal.RequireFromString("3.75")) ||
		!got[0].Date.Equal(catalog.Day(day)) {
		t.Fatalf("got %+v, want the third statement only", got)
	}
	if got, _ := catalog.CampaignActuals(ctx, conn, other, cmp, catalog.ActualsQuery{Limit: 10}); len(got) != 0 {
		t.Fatalf("another workspace reads %d rows", len(got))
	}
}

func TestUpsertRejectsInvalidRowsAndWritesNothing(t *testing.T) {
	_, conn := chtest.NewDB(t)
	ctx := context.Background()
	ws, cmp := uuid.New(), uuid.New()
	good := catalog.CampaignActual{CampaignID: cmp, Date: time.Now(), Metrics: catalog.Metrics{Spend: decimal.NewFromInt(1), Currency: "USD"}}
	for name, bad := range map[string]catalog.CampaignActual{
		"currency": {CampaignID: cmp, Date: time.Now(), Metrics: catalog.Metrics{Currency: "usd"}},
		"negative": {CampaignID: cmp, Date: time.Now(), Metrics: catalog.Metrics{Spend: decimal.NewFromInt(-1), Currency: "USD"}},
		"places":   {CampaignID: cmp, Date: time.Now(), Metrics: catalog.Metrics{Spend: decimal.RequireFromString("0.00001"), Currency: "USD"}},
		"campaign": {Date: time.Now(), Metrics: catalog.Metrics{Currency: "USD"}},
	} {
		if err := catalog.UpsertCampaignActuals(ctx, conn, ws, []catalog.CampaignActual{good, bad}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if got, _ := catalog.CampaignActuals(ctx, conn, ws, cmp, catalog.ActualsQuery{Limit: 10}); len(got) != 0 {
		t.Fatalf("a rejected upsert wrote %d rows", len(got))
	}
}
