// Package dynalite runs the store's tests against dynalite, an independent
// implementation of the DynamoDB API (npm, installed from scripts/dynalite's
// lockfile), so the embedded server is not the only judge of the store.
// dynalite has no transactions; scripts/dynalite/transact.js adds
// TransactWriteItems in dynalite's own process, from dynalite's single-item
// operations, and nothing else. Start runs both.
package dynalite
