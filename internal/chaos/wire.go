package chaos

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// The wire side of the Injector: the answers it makes up and what it reads
// of the requests it passes on.

func drain(req *http.Request) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
}

// statusResponse is the API server's answer for an error code, as a JSON
// Status that client-go turns into the matching StatusError.
func statusResponse(req *http.Request, code int) *http.Response {
	reason := map[int]metav1.StatusReason{
		http.StatusConflict:            metav1.StatusReasonConflict,
		http.StatusInternalServerError: metav1.StatusReasonInternalError,
		http.StatusServiceUnavailable:  metav1.StatusReasonServiceUnavailable,
		http.StatusGatewayTimeout:      metav1.StatusReasonTimeout,
	}[code]
	body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"injected by the chaos runner: %d %s","reason":%q,"code":%d}`,
		code, http.StatusText(code), reason, code)
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": []string{"application/json"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

func timeoutError(req *http.Request) error {
	return &net.OpError{Op: "read", Net: "tcp", Err: &injectedTimeout{method: req.Method, path: req.URL.Path}}
}

// injectedTimeout is a network timeout, as net.Error.
type injectedTimeout struct{ method, path string }

func (e *injectedTimeout) Error() string {
	return fmt.Sprintf("i/o timeout injected by the chaos runner (%s %s)", e.method, e.path)
}
func (e *injectedTimeout) Timeout() bool   { return true }
func (e *injectedTimeout) Temporary() bool { return true }
func (e *injectedTimeout) Unwrap() error   { return os.ErrDeadlineExceeded }

// isConfigMapPath tells whether path names one ConfigMap:
// /api/v1/namespaces/<ns>/configmaps/<name>.
func isConfigMapPath(path string) bool {
	_, name := configMapKey(path)
	return name != ""
}

func configMapKey(path string) (string, string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// A prefix (the proxy's replica name) may come first.
	for i := range parts {
		if len(parts) == i+6 && parts[i] == "api" && parts[i+1] == "v1" && parts[i+2] == "namespaces" && parts[i+4] == "configmaps" {
			return parts[i+3], parts[i+5]
		}
	}
	return "", ""
}

// machinePath tells whether path names Cluster API's Machines: their list
// (name "") or one Machine; a prefix (the proxy's replica name) may come
// first.
func machinePath(path string) (name string, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := range parts {
		if len(parts) < i+4 || parts[i] != "apis" || parts[i+1] != "cluster.x-k8s.io" {
			continue
		}
		rest := parts[i+3:]
		if len(rest) > 2 && rest[0] == "namespaces" {
			rest = rest[2:]
		}
		switch {
		case len(rest) == 1 && rest[0] == "machines":
			return "", true
		case len(rest) == 2 && rest[0] == "machines":
			return rest[1], true
		}
		return "", false
	}
	return "", false
}

// preconditionUID reads the UID precondition of a DELETE's body (JSON or
// protobuf DeleteOptions).
func preconditionUID(body []byte) types.UID {
	if len(body) == 0 {
		return ""
	}
	obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return ""
	}
	if o, ok := obj.(*metav1.DeleteOptions); ok && o.Preconditions != nil && o.Preconditions.UID != nil {
		return *o.Preconditions.UID
	}
	return ""
}

// objectUID reads the UID of the object a DELETE answered with.
func objectUID(body []byte) types.UID {
	obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return ""
	}
	if o, ok := obj.(metav1.Object); ok {
		return o.GetUID()
	}
	return ""
}
