// Command queue is the Lambda function behind the public queue routes
// (enter, poll, leave), the passes' JWKS and the API's $default route; the
// behaviour is in internal/httpapi and internal/queue. A missing
// PASS_WRAP_KMS_KEY_ID or SHUFFLE_KMS_KEY_ID is an init error. Build it
// with -tags lambda.norpc as bootstrap for provided.al2023 (make
// build-QueueFunction).
package main

import "github.com/example/waitingroom/internal/app"

func main() { app.StartLambda(app.QueueFromEnv, (*app.App).QueueHandler) }
