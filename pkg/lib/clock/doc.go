// Package clock lets every time-dependent rule and every loop that waits
// take its notion of time from the caller. Production code gets Real, the
// wall clock in UTC; tests get Fake, which only moves when the test steps
// it, so timers, tickers and deadlines fire deterministically instead of
// after real sleeps.
package clock
