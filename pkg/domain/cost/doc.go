// Package cost prices a job: what its leased time, and its share of the time
// its instances spent booting and idle, cost at the instance's price. It is
// pure, so the store, the API and the CLI charge a job the same way and the
// rule is tested as a table (docs/scaling.md, "Cost per job").
package cost
