// Package edgegate holds the CloudFront Function that gates the protected site
// at the edge (viewer-request, cloudfront-js-2.0), exactly as it is deployed.
package edgegate

import _ "embed"

// Source is the function's code, gate.js; internal/tools/cfjs runs it locally.
//
//go:embed gate.js
var Source string
