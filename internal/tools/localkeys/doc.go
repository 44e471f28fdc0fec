// Package localkeys holds admission pass keys without KMS, for the local
// server, the tools and tests: keys in memory and an Issuer of fixed ones,
// a key store in memory, a wrapper whose key lives in this process, PEM key
// files, and the App option that signs passes with them. The Lambdas never link it (deps_test.go).
package localkeys
