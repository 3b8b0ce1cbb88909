// Prometheus metrics for GET /metrics. One prom-client Registry per app (not the global one),
// so two apps in one process (tests) never collide.
import { Counter, Gauge, Histogram, Registry as PromRegistry, collectDefaultMetrics } from 'prom-client'
import type { KindEvent } from './registry.js'
import type { VerificationEvent } from './verification.js'

export class Metrics {
  readonly registry = new PromRegistry()
  readonly #verifications = new Counter({ name: 'arbiter_verifications_total', help: 'Verifications by kind, outcome (ok|error) and error code', labelNames: ['kind', 'outcome', 'code'] as const, registers: [this.registry] })
  readonly #duration = new Histogram({ name: 'arbiter_verification_duration_seconds', help: 'Verification duration by kind', labelNames: ['kind'] as const, buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 120], registers: [this.registry] })
  readonly #responses = new Counter({ name: 'arbiter_http_responses_total', help: 'HTTP responses by route and status', labelNames: ['route', 'status'] as const, registers: [this.registry] })
  readonly #rejected = new Counter({ name: 'arbiter_requests_rejected_total', help: 'Requests refused before verification (overloaded, shutting_down, unauthorized)', labelNames: ['reason'] as const, registers: [this.registry] })
  readonly #endpointRetries = new Counter({ name: 'arbiter_endpoint_retries_total', help: 'Endpoint retries by the error that caused them', labelNames: ['reason'] as const, registers: [this.registry] })
  readonly #workerStarts = new Counter({ name: 'arbiter_plugin_worker_starts_total', help: 'Plugin worker processes started', labelNames: ['plugin'] as const, registers: [this.registry] })
  readonly #workerCrashes = new Counter({ name: 'arbiter_plugin_worker_crashes_total', help: 'Plugin worker processes that died during a call', labelNames: ['plugin'] as const, registers: [this.registry] })
  readonly #pluginTimeouts = new Counter({ name: 'arbiter_plugin_timeouts_total', help: 'Plugin calls killed at their deadline', labelNames: ['plugin'] as const, registers: [this.registry] })
  readonly #judgeCalls = new Counter({ name: 'arbiter_judge_calls_total', help: 'Calls to the judge server by outcome', labelNames: ['outcome'] as const, registers: [this.registry] })
  readonly #judgeTokens = new Counter({ name: 'arbiter_judge_tokens_total', help: 'Judge tokens by type (prompt|completion)', labelNames: ['type'] as const, registers: [this.registry] })
  readonly #judgeCacheHits = new Counter({ name: 'arbiter_judge_cache_hits_total', help: 'Rubric verdicts served from the cache', registers: [this.registry] })

  constructor (inFlight: () => number, queued: () => number) {
    const registers = [this.registry]
    // Gauges read live values at scrape time instead of being kept in step by hand.
    new Gauge({ name: 'arbiter_verifications_in_flight', help: 'Verifications running now', registers, collect () { this.set(inFlight()) } }) // eslint-disable-line no-new
    new Gauge({ name: 'arbiter_verifications_queued', help: 'Verifications waiting for a slot', registers, collect () { this.set(queued()) } }) // eslint-disable-line no-new
    collectDefaultMetrics({ register: this.registry })
  }

  // Labelled children are looked up once per label set: prom-client hashes labels on every
  // call otherwise, and this runs once per verification.
  readonly #children = new Map<string, { count: { inc: () => void }, duration: { observe: (value: number) => void } }>()

  verification = (event: VerificationEvent): void => {
    const key = `${event.kind}|${event.outcome}|${event.code ?? ''}`
    let child = this.#children.get(key)
    if (child === undefined) {
      child = {
        count: this.#verifications.labels(event.kind, event.outcome, event.code ?? ''),
        duration: this.#duration.labels(event.kind)
      }
      this.#children.set(key, child)
    }
    child.count.inc()
    child.duration.observe(event.durationMs / 1000)
  }

  readonly #responseChildren = new Map<string, { inc: () => void }>()

  response (route: string, status: number): void {
    const key = `${route}|${status}`
    let child = this.#responseChildren.get(key)
    if (child === undefined) {
      child = this.#responses.labels(route, String(status))
      this.#responseChildren.set(key, child)
    }
    child.inc()
  }

  rejected (reason: 'overloaded' | 'shutting_down' | 'unauthorized'): void {
    this.#rejected.inc({ reason })
  }

  kind = (event: KindEvent): void => {
    switch (event.type) {
      case 'endpoint_retry': this.#endpointRetries.inc({ reason: event.reason }); break
      case 'plugin_worker_start': this.#workerStarts.inc({ plugin: event.plugin }); break
      case 'plugin_worker_crash': this.#workerCrashes.inc({ plugin: event.plugin }); break
      case 'plugin_timeout': this.#pluginTimeouts.inc({ plugin: event.plugin }); break
      case 'judge_call': this.#judgeCalls.inc({ outcome: event.outcome }); break
      case 'judge_tokens':
        this.#judgeTokens.inc({ type: 'prompt' }, event.prompt)
        this.#judgeTokens.inc({ type: 'completion' }, event.completion)
        break
      case 'judge_cache_hit': this.#judgeCacheHits.inc(); break
    }
  }

  async text (): Promise<string> {
    return await this.registry.metrics()
  }

  get contentType (): string {
    return this.registry.contentType
  }
}
