// Package fairshare is the rule that picks whose job a free slot takes when
// several tenants have work waiting: by weighted share of the jobs leased
// now, within each tenant's cap, instead of oldest first across tenants,
// so one tenant's burst does not starve the others. It also says how much
// of the backlog the caps let run, which is what capacity should be sized to.
//
// It is pure (no store, no clock) so the lease path, the scaler and the
// simulator can share it.
package fairshare
