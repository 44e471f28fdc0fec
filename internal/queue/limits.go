package queue

// Timings of the service that an operator's tools reason with (wrctl
// check): how long a waiting token is kept after its enter, the margin
// added to an admission window before its slot is freed, and the fold's
// period.
const (
	WaitingTokenRetention = waitingTokenRetention
	WindowMargin          = expiryMargin
	FoldPeriod            = foldEvery
)
