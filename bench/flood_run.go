package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// floodMain runs `svc bench flood`: the normal traffic alone (the baseline), then the
// normal traffic and the flood at once, then reads the rejections table.
func floodMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench flood", flag.ContinueOnError)
	var ff floodFlags
	ff.register(fs)
	pf, err := parseIngestFlags(fs, "flood", args)
	if err != nil {
		return err
	}
	f := *pf
	if err := ff.validate(); err != nil {
		return err
	}
	if f.eventIDs {
		return errors.New("-event-ids: not with flood")
	}
	title := fmt.Sprintf("flood: normal traffic %.0f req/s × %d events (%.0f events/s) beside %.0f req/s × %d invalid events (%.0f events/s) for %s",
		f.rate, f.batch, f.rate*float64(f.batch), ff.rate, f.batch, ff.rate*float64(f.batch), f.duration)
	rep := newReport("flood", title, &f.common, args)
	for k, v := range map[string]any{"batch": f.batch, "keys": f.keys, "pixels": f.pixels, "invalid": f.invalid, "retry": f.retry,
		"flood_rate": ff.rate, "flood_workers": ff.workers, "flood_pixels": ff.pixels, "samples_cap": ff.samples,
		"flush_interval": ff.flushEvery.String(), "baseline": ff.baseline, "db": f.chDB} {
		rep.Params[k] = v
	}
	run := runID()
	fx, err := Provision(ctx, f.redis(), "bench-flood-normal-"+run, f.pixels, f.keys, []string{"events:write", "pixels:read"})
	if err != nil {
		return err
	}
	defer closeFixture(ctx, fx)
	fl, err := Provision(ctx, f.redis(), "bench-flood-invalid-"+run, ff.pixels, ff.keys, []string{"events:write"})
	if err != nil {
		return err
	}
	defer closeFixture(ctx, fl)

	now := time.Now()
	bodies, sent := batchBodies(Generate(GenConfig{BatchSize: f.batch, Pixels: f.pixels, InvalidFrac: f.invalid, Bodies: f.bodies,
		Seed: f.seed, Now: now}), fx.PixelIDs)
	fbodies, fsent := batchBodies(Generate(GenConfig{BatchSize: f.batch, Pixels: ff.pixels, InvalidFrac: 1, Bodies: min(f.bodies, 256),
		Seed: f.seed + 1, Now: now}), fl.PixelIDs)
	hc, err := hostClient(f.target, f.workers, f.timeout)
	if err != nil {
		return err
	}
	fhc, err := hostClient(f.target, ff.workers, f.timeout)
	if err == nil && ff.source != "" {
		fhc.Dial = dialFrom(ff.source, f.timeout)
	}
	if err != nil {
		return err
	}
	chc, err := hostClient(f.chHTTP, 4, 30*time.Second)
	if err != nil {
		return err
	}
	table := rejTable{hc: chc, base: f.chHTTP, db: f.chDB, timeout: 30 * time.Second}
	res := &FloodResult{OfferedRate: ff.rate, OfferedEvents: ff.rate * float64(f.batch)}
	res.Table.Cap = ff.samples
	if res.Table.RowsBefore, err = table.rows(); err != nil {
		return fmt.Errorf("the rejections table (-clickhouse-http %s, -db %s): %w", f.chHTTP, f.chDB, err)
	}
	auth, fauth := bearer(fx.Secrets), bearer(fl.Secrets)
	url := f.target + "/events"

	if ff.warmup > 0 {
		wc := f.common
		wc.duration, wc.quiet, wc.metrics = ff.warmup, true, ""
		plan := newIngestPlan(&f, run+"w", len(bodies), len(fx.Secrets))
		warm := newReport("flood-warmup", title, &wc, args)
		runLoad(ctx, &wc, warm, poster(hc, url, f.workers, f.timeout, bodies, sent, auth, plan), nil)
		forget(ctx, fx, rep, plan, warm.Requests.Scheduled)
	}
	if ff.baseline {
		// Its own connections, so that the run beside the flood does not inherit warm ones.
		ahc, err := hostClient(f.target, f.workers, f.timeout)
		if err != nil {
			return err
		}
		alone := newReport("flood-normal-alone", title, &f.common, args)
		plan := newIngestPlan(&f, run+"a", len(bodies), len(fx.Secrets))
		fmt.Printf("== flood: the normal traffic alone first (%s)\n", f.duration)
		runLoad(ctx, &f.common, alone, poster(ahc, url, f.workers, f.timeout, bodies, sent, auth, plan), nil)
		a := normalFigures(alone, f.batch)
		res.Alone = &a
		forget(ctx, fx, rep, plan, alone.Requests.Scheduled)
	}
	plan := newIngestPlan(&f, run, len(bodies), len(fx.Secrets))
	fplan := ingestPlan{run: run + "f", lag: 1, bodies: len(fbodies), keys: len(fl.Secrets)} // no retries, no Idempotency-Key
	fc := f.common
	fc.rate, fc.workers, fc.quiet, fc.metrics = ff.rate, ff.workers, true, ""
	frep := newReport("flood-invalid", title, &fc, args)
	fmt.Printf("== flood: the normal traffic and the flood at once (%s)\n", f.duration)
	runBoth(ctx, &f.common, rep, poster(hc, url, f.workers, f.timeout, bodies, sent, auth, plan),
		&fc, frep, poster(fhc, url, ff.workers, f.timeout, fbodies, fsent, fauth, fplan))
	forget(ctx, fx, rep, plan, rep.Requests.Scheduled)

	res.Requests, res.ByCode, res.Latency = frep.Requests, frep.Errors, frep.Latency
	if frep.Elapsed > 0 {
		res.TakenPerSecond = round(float64(answered(frep.Errors, 422))/frep.Elapsed, 1)
	}
	res.With = normalFigures(rep, f.batch)
	if res.Alone != nil {
		ok, why := holds(*res.Alone, res.With, ff.holdP99)
		res.Holds, res.Verdict = &ok, why
	} else {
		res.Verdict = "no baseline (-baseline=false): the normal traffic's figures beside the flood only"
	}
	g := &res.Table
	g.Expected = expectedRejections(frep.Errors, f.batch)
	g.Waited = round(table.settle(ctx, fl.Workspace.String(), g.Expected, ff.settle).Seconds(), 1)
	if err := table.growth(fl.Workspace.String(), g); err != nil {
		return err
	}
	if g.RowsAfter, err = table.rows(); err != nil {
		return err
	}
	g.judge(ff.flushEvery)
	rep.Flood = res
	return finish(&f.common, rep)
}

// batchBodies renders batches as POST /events bodies for pixelIDs, with their sizes.
func batchBodies(gen []GenBatch, pixelIDs []string) ([][]byte, []int) {
	bodies, sent := make([][]byte, len(gen)), make([]int, len(gen))
	for i := range gen {
		bodies[i], sent[i] = BatchJSON(&gen[i], pixelIDs[gen[i].Pixel]), len(gen[i].Events)
	}
	return bodies, sent
}

func bearer(secrets []string) [][]byte {
	out := make([][]byte, len(secrets))
	for i, s := range secrets {
		out[i] = []byte("Bearer " + s)
	}
	return out
}

// forget removes the idempotency records of a run's n requests (a note when it fails).
func forget(ctx context.Context, fx *Fixture, rep *Report, plan ingestPlan, n int64) {
	if !plan.idem {
		return
	}
	if err := fx.ForgetRequests(ctx, n, func(j int64) (uuid.UUID, string) { return fx.KeyIDs[plan.key(j)], plan.idemKey(j) }); err != nil {
		rep.Notes = append(rep.Notes, "cleanup: "+err.Error())
	}
}

func closeFixture(ctx context.Context, fx *Fixture) {
	if err := fx.Close(ctx); err != nil {
		fmt.Printf("cleanup: %v\n", err)
	}
}
