package mcp_test

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	json "github.com/goccy/go-json"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"svc/api"
	"svc/api/mcp"
	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/schema/apitest"
	"svc/schema/catalog"
	"svc/schema/chtest"
	"svc/schema/workspace"
)

// TestToolCallsSeeTheClientTheRequestCameFrom: a tool call is dispatched as a request of
// its own, which must be attributed to the same client as the MCP request. Behind a
// trusted proxy that added an X-Forwarded-For line after the client's forged one, a key
// allowed from the client's address is served by the tools too.
func TestToolCallsSeeTheClientTheRequestCameFrom(t *testing.T) {
	_, conn := chtest.NewDB(t)
	a := &api.API{Conn: conn}
	s := apitest.Start(t, append(a.Routes(), mcp.New().Routes()...), func(c *httpserver.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")} // the test acts as the proxy
	})
	a.Keys = s.Keys
	ctx := context.Background()
	if _, err := catalog.SeedShowroom(ctx, s.Keys, conn); err != nil {
		t.Fatal(err)
	}
	w, err := s.Keys.Workspace(ctx, catalog.ShowroomWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	_, sec := s.Key(t, workspace.KeySpec{WorkspaceID: w.ID, Env: apikey.Sandbox, Scopes: apikey.Scopes, Allow: []string{"203.0.113.0/24"}})

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"plans","arguments":{"limit":1}}}`
	req, err := http.NewRequest("POST", s.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+sec)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", revisions[1])
	req.Header.Add("X-Forwarded-For", "10.9.9.9")    // the client's own line
	req.Header.Add("X-Forwarded-For", "203.0.113.9") // the proxy's line: the client
	resp, err := s.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("MCP request from an allowed client: %d %s", resp.StatusCode, b)
	}
	var msg struct {
		Result sdk.CallToolResult `json:"result"`
	}
	if err := json.Unmarshal(b, &msg); err != nil || msg.Result.IsError {
		t.Fatalf("the tool call is not attributed to the MCP request's client: %v %s", err, b)
	}
}
