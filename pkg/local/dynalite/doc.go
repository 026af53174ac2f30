// Package dynalite runs the store's tests against dynalite, an independent
// implementation of the DynamoDB API (npm, installed from scripts/dynalite's
// lockfile), so the embedded server is not the only judge of the store.
// dynalite has no transactions; Shim adds TransactWriteItems in front of it
// from dynalite's own single-item operations, and nothing else.
package dynalite
