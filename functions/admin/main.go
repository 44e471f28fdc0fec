// Command admin is the Lambda function behind the admin routes, which API
// Gateway's AWS_IAM authorizer guards and httpapi.IAMAuth checks again; the
// behaviour is in internal/httpapi and internal/queue. Build it with -tags
// lambda.norpc as bootstrap for provided.al2023 (make build-AdminFunction).
package main

import "github.com/example/waitingroom/internal/app"

func main() { app.StartLambda(app.FromEnv, (*app.App).AdminHandler) }
