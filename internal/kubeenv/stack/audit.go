package stack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Write is one write request from the API server's audit log.
type Write struct {
	User        string
	Verb        string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	// Code is the HTTP status of the response.
	Code int
	// At is when the response was sent.
	At time.Time
}

// Writes reads every write request logged so far by the management
// cluster's API server, in the order they were answered.
func (m *Mgmt) Writes() ([]Write, error) {
	raw, err := os.ReadFile(m.Env.AuditLogPath())
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	out, err := parseAudit(raw)
	if err != nil {
		return nil, fmt.Errorf("reading the audit log %s: %w", m.Env.AuditLogPath(), err)
	}
	return out, nil
}

// parseAudit reads the write requests of an audit log. The API server may
// be writing another request's event as the file is read: the text after
// the last newline is not an event yet.
func parseAudit(raw []byte) ([]Write, error) {
	raw = raw[:bytes.LastIndexByte(raw, '\n')+1]
	var out []Write
	for i, line := range bytes.SplitAfter(raw, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var ev struct {
			Stage string `json:"stage"`
			Verb  string `json:"verb"`
			User  struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
				Namespace   string `json:"namespace"`
				Name        string `json:"name"`
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
			StageTimestamp time.Time `json:"stageTimestamp"`
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		if ev.Stage != "ResponseComplete" {
			continue
		}
		out = append(out, Write{
			User: ev.User.Username, Verb: ev.Verb,
			Resource: ev.ObjectRef.Resource, Subresource: ev.ObjectRef.Subresource,
			Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name,
			Code: ev.ResponseStatus.Code, At: ev.StageTimestamp,
		})
	}
	return out, nil
}
