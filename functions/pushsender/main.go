// Command pushsender is the Lambda function EventBridge Scheduler starts
// every minute to send the waiting room's Web Push messages for that
// minute; the behaviour is in internal/notify. Build it with -tags
// lambda.norpc as bootstrap for provided.al2023 (make
// build-PushSenderFunction).
package main

import "github.com/example/waitingroom/internal/app"

func main() { app.StartSender() }
