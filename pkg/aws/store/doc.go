// Package store keeps fleetq's state in one DynamoDB table: jobs with fenced
// leases, workers, per-fleet state and counters, registration rate windows and
// rejected submissions. Every state change is a conditional write (or a
// transaction of them); index reads only find candidates and never decide
// anything, because GSI reads are eventually consistent. The key design is
// written up in docs/data-model.md.
//
// The package is the DynamoDB adapter; the records it takes and returns are
// defined where they mean something: jobs, heartbeat answers and lease
// sweeps in pkg/domain/job; workers, their token proofs (Auth),
// registrations and instance terminations in pkg/domain/worker; API keys,
// principal mappings and open-jobs caps in pkg/domain/tenant; job events,
// their publisher and due callbacks in pkg/domain/jobevent; rejected
// submissions in pkg/domain/submission; cost groups in pkg/domain/cost;
// fleet state, decisions and interruption counts in pkg/domain/fleetstate;
// and the sentinel errors (ErrNotFound, ErrLeaseLost, ...) in
// pkg/domain/fault. records.go keeps the store's older names for them as
// aliases, for the store's own code. Of the services only the composition
// root (pkg/service/system) imports this package: it builds the Store and
// hands it to each service as the small interface the service declares
// (pkg/layers_test.go holds the rule). Its files
// follow the aggregates: jobs.go, shards.go (a fleet's partitions spread
// over its shards, and reading every shard at once), ready.go (the ready
// queue's shards),
// lease.go (the lease planner's source: its reads, one claim at a time, and
// the sweeper's steps; the planner in pkg/domain/lease decides), report.go
// and deadlines.go (jobs and their leases), with fairlease.go (the reads fair
// share asks for), leasecap.go (tenants' leased caps), tenants.go (tenants'
// queued caps), tenantjobs.go (a tenant's jobs listed a page at a time)
// and ondemand.go (jobs pinned to On-Demand), estimates.go (the snapshot a
// queued job's estimated start is projected from); workers.go, retoken.go (a worker's token replaced, its leases
// moved to the new one), preempt.go (draining and ending workers the control
// plane decided to end, their leases requeued), fleetstate.go,
// registration.go, bootreports.go (machines that could not start work),
// pool.go (the stopped Spot pool's instances and their conditional moves),
// interruptions.go, outbox.go, callbacks.go (outcomes due at callback URLs),
// costs.go and spotprices.go (the price of each job), apikeys.go (tenants'
// API keys), principals.go (IAM principals mapped to tenants), console.go
// (operator console sessions); over store.go (the client, writes,
// transactions and the one query helper), schema.go (every
// key, prefix and attribute name), records.go (the domain's records and
// errors by their store names) and itemsize.go (the 400 KB item limit).
package store
