package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// Toxic is a toxiproxy fault: see the toxiproxy README for the types
// (latency, limit_data, reset_peer, timeout, ...) and their attributes.
type Toxic struct {
	Type       string         `json:"type"`
	Stream     string         `json:"stream"` // "upstream" (to the server) or "downstream"
	Toxicity   float64        `json:"toxicity"`
	Attributes map[string]int `json:"attributes"`
}

// Proxy puts a toxiproxy proxy with the given toxics in front of upstream
// (host:port) and returns the address to use instead. The proxy is removed
// when the test ends. It follows Server's rule when toxiproxy is missing.
func Proxy(t *testing.T, upstream string, toxics ...Toxic) string {
	t.Helper()
	api := Server(t, "toxiproxy", "HOMESNAP_TEST_TOXIPROXY")
	name := "homesnap-" + randomHex(6)
	var p struct{ Listen string }
	call(t, api+"/proxies", map[string]any{"name": name, "listen": "127.0.0.1:0", "upstream": upstream, "enabled": true}, &p)
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, api+"/proxies/"+name, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	for i, tx := range toxics {
		body := map[string]any{"name": fmt.Sprintf("t%d", i), "type": tx.Type, "stream": tx.Stream, "toxicity": tx.Toxicity, "attributes": tx.Attributes}
		call(t, api+"/proxies/"+name+"/toxics", body, nil)
	}
	return p.Listen
}

func call(t *testing.T, url string, body, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("toxiproxy: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("toxiproxy: POST %s: %s", url, resp.Status)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("toxiproxy: %v", err)
		}
	}
}
