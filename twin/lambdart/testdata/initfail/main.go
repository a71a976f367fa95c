// Command initfail reports an init error through the Runtime API and
// exits, as a runtime does when its handler cannot be set up.
package main

import (
	"net/http"
	"os"
	"strings"
)

func main() {
	url := "http://" + os.Getenv("AWS_LAMBDA_RUNTIME_API") + "/2018-06-01/runtime/init/error"
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"errorMessage":"missing EVENTS_TABLE","errorType":"Runtime.ConfigError"}`))
	req.Header.Set("Lambda-Runtime-Function-Error-Type", "Runtime.ConfigError")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	os.Exit(1)
}
