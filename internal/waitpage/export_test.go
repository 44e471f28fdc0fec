package waitpage

// StripComments is stripComments, for the tests.
var StripComments = stripComments
