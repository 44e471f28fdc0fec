// Command reporter is the Lambda function EventBridge Scheduler starts
// every 15 minutes to make the final report of each program that settled
// (docs/design.md, "The report after the sale"); the behaviour is in
// internal/queue. Build it with -tags lambda.norpc as bootstrap for
// provided.al2023 (make build-ReporterFunction).
package main

import "github.com/example/waitingroom/internal/app"

func main() { app.StartReporter() }
