package chaos

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// The wire side of the Injector: the answers it makes up and what it reads
// of the requests it passes on.

// readBody reads body, if any, to its end and closes it; it returns what
// it read and a body that reads it again (nil when body was nil).
func readBody(body io.ReadCloser) ([]byte, io.ReadCloser, error) {
	if body == nil {
		return nil, nil, nil
	}
	b, err := io.ReadAll(body)
	_ = body.Close()
	return b, io.NopCloser(bytes.NewReader(b)), err
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

// answer is what the caller gets instead of the server's answer: the API
// server's Status for code, or a network timeout when code is 0.
func answer(req *http.Request, code int) (*http.Response, error) {
	if code == 0 {
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: &injectedTimeout{method: req.Method, path: req.URL.Path}}
	}
	return statusResponse(req, code), nil
}

// injectedTimeout is a network timeout, as net.Error.
type injectedTimeout struct{ method, path string }

func (e *injectedTimeout) Error() string {
	return fmt.Sprintf("i/o timeout injected by the chaos runner (%s %s)", e.method, e.path)
}
func (e *injectedTimeout) Timeout() bool   { return true }
func (e *injectedTimeout) Temporary() bool { return true }
func (e *injectedTimeout) Unwrap() error   { return os.ErrDeadlineExceeded }

// configMapDelete tells whether req deletes one ConfigMap
// (/api/v1/namespaces/<ns>/configmaps/<name>), and names it.
func configMapDelete(req *http.Request) (kubeenv.Request, bool) {
	r := kubeenv.Classify(req)
	return r, r.Verb == "delete" && r.Group == "" && r.Version == "v1" && r.Resource == "configmaps" && r.Namespace != "" && r.Name != ""
}

// machineRead tells whether req reads Cluster API's Machines: one Machine,
// by name, or their list (name "").
func machineRead(req *http.Request) (name string, ok bool) {
	r := kubeenv.Classify(req)
	return r.Name, req.Method == http.MethodGet && r.Group == capi.Group && r.Resource == "machines"
}

// uidIn reads the UID a body names: the UID precondition of a DELETE's
// DeleteOptions, or the UID of the object a DELETE answered with (JSON or
// protobuf).
func uidIn(body []byte) types.UID {
	obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	switch o := obj.(type) {
	case *metav1.DeleteOptions:
		if err == nil && o.Preconditions != nil && o.Preconditions.UID != nil {
			return *o.Preconditions.UID
		}
	case metav1.Object:
		if err == nil {
			return o.GetUID()
		}
	}
	return ""
}
