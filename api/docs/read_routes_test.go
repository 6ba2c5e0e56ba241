package docs_test

import "svc/api"

// readRoutes returns the read API role's routes (GET /me, /plans…, POST
// /imports/actuals). nil until the read API role is wired in here.
func readRoutes() []api.Route { return nil }
