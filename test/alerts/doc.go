// Package alerts tests the alert rules of config/monitoring against the
// real initlock-manager: it runs the manager on the local control plane,
// puts it into each situation an alert is about (and into the situations
// that must stay quiet: a restore of many clusters, a single-node init, a
// rolling update), scrapes its HTTPS metrics endpoint as the ServiceMonitor
// says, and evaluates the rule file with Prometheus's own packages: rulefmt
// parses and checks it, the scraped text goes through Prometheus's parser
// into a TSDB, and rules.AlertingRule evaluates each alert with the PromQL
// engine, pending and firing as in a Prometheus server.
//
// Time is simulated between scrapes: a situation that lasts an hour is one
// real scrape whose samples are repeated every scrape interval for an hour
// of simulated time, as a Prometheus would record a manager whose metrics
// do not change; a failed scrape records up 0 and marks the target's
// series stale, as Prometheus's scrape loop does. What the repeated samples
// leave out, by construction, is a change in the manager during that hour.
//
// It is a module of its own so that only this test depends on Prometheus.
// It holds no code.
package alerts
