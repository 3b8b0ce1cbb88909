// Prometheus metrics for GET /metrics. One prom-client Registry per app (not the global one),
// so two apps in one process (tests) never collide.
import { Counter, Gauge, Registry as PromRegistry, collectDefaultMetrics } from 'prom-client'
import type { KindEvent } from './registry.js'
import type { VerificationEvent } from './verification.js'

function escapeLabel (value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')
}

/** A counter keyed by label values joined with NUL; rendered in Prometheus text format. */
class HotCounter {
  readonly #values = new Map<string, number>()
  constructor (readonly name: string, readonly help: string, readonly labelNames: string[]) {
    if (labelNames.length === 0) this.#values.set('', 0) // one series, shown from the start as 0
  }

  inc (key: string, amount = 1): void {
    this.#values.set(key, (this.#values.get(key) ?? 0) + amount)
  }

  render (): string {
    let text = `# HELP ${this.name} ${this.help}\n# TYPE ${this.name} counter\n`
    for (const [key, value] of this.#values) {
      const labels = key.split('\u0000').map((label, i) => `${this.labelNames[i]}="${escapeLabel(label)}"`).join(',')
      text += this.labelNames.length === 0 ? `${this.name} ${value}\n` : `${this.name}{${labels}} ${value}\n`
    }
    return text + '\n'
  }
}

/** A histogram with one label, same format as prom-client's. */
class HotHistogram {
  readonly #series = new Map<string, { buckets: number[], sum: number, count: number }>()
  constructor (readonly name: string, readonly help: string, readonly labelName: string, readonly bounds: number[]) {}

  observe (label: string, value: number): void {
    let series = this.#series.get(label)
    if (series === undefined) {
      series = { buckets: this.bounds.map(() => 0), sum: 0, count: 0 }
      this.#series.set(label, series)
    }
    for (let i = 0; i < this.bounds.length; i++) if (value <= this.bounds[i]) series.buckets[i]++
    series.sum += value
    series.count++
  }

  render (): string {
    let text = `# HELP ${this.name} ${this.help}\n# TYPE ${this.name} histogram\n`
    for (const [label, series] of this.#series) {
      const l = `${this.labelName}="${escapeLabel(label)}"`
      this.bounds.forEach((bound, i) => { text += `${this.name}_bucket{le="${bound}",${l}} ${series.buckets[i]}\n` })
      text += `${this.name}_bucket{le="+Inf",${l}} ${series.count}\n${this.name}_sum{${l}} ${series.sum}\n${this.name}_count{${l}} ${series.count}\n`
    }
    return text + '\n'
  }
}

export class Metrics {
  readonly registry = new PromRegistry()
  // The metrics touched on every request, and the judge's on every judged one, are kept in plain
  // maps (see HotCounter): prom-client validates and hashes labels on every call, which cost more
  // than the rest of a verification's bookkeeping together. The rest stay in prom-client.
  readonly #verifications = new HotCounter('arbiter_verifications_total', 'Verifications by kind, outcome (ok|error) and error code', ['kind', 'outcome', 'code'])
  readonly #duration = new HotHistogram('arbiter_verification_duration_seconds', 'Verification duration by kind', 'kind', [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 120])
  readonly #responses = new HotCounter('arbiter_http_responses_total', 'HTTP responses by route and status', ['route', 'status'])
  readonly #rejected = new Counter({ name: 'arbiter_requests_rejected_total', help: 'Requests refused before verification (overloaded, shutting_down, unauthorized)', labelNames: ['reason'] as const, registers: [this.registry] })
  readonly #endpointRetries = new Counter({ name: 'arbiter_endpoint_retries_total', help: 'Endpoint retries by the error that caused them', labelNames: ['reason'] as const, registers: [this.registry] })
  readonly #workerStarts = new Counter({ name: 'arbiter_plugin_worker_starts_total', help: 'Plugin worker processes started', labelNames: ['plugin'] as const, registers: [this.registry] })
  readonly #workerCrashes = new Counter({ name: 'arbiter_plugin_worker_crashes_total', help: 'Plugin worker processes that died during a call', labelNames: ['plugin'] as const, registers: [this.registry] })
  readonly #pluginTimeouts = new Counter({ name: 'arbiter_plugin_timeouts_total', help: 'Plugin calls killed at their deadline', labelNames: ['plugin'] as const, registers: [this.registry] })
  readonly #judgeCalls = new HotCounter('arbiter_judge_calls_total', 'Calls to the judge server by outcome', ['outcome'])
  readonly #judgeTokens = new HotCounter('arbiter_judge_tokens_total', 'Judge tokens by type (prompt|completion)', ['type'])
  readonly #judgeCacheHits = new HotCounter('arbiter_judge_cache_hits_total', 'Rubric verdicts served from the cache', [])

  constructor (inFlight: () => number, queued: () => number) {
    const registers = [this.registry]
    // Gauges read live values at scrape time instead of being kept in step by hand.
    new Gauge({ name: 'arbiter_verifications_in_flight', help: 'Verifications running now', registers, collect () { this.set(inFlight()) } }) // eslint-disable-line no-new
    new Gauge({ name: 'arbiter_verifications_queued', help: 'Verifications waiting for a slot', registers, collect () { this.set(queued()) } }) // eslint-disable-line no-new
    collectDefaultMetrics({ register: this.registry })
  }

  verification = (event: VerificationEvent): void => {
    this.#verifications.inc(`${event.kind}\u0000${event.outcome}\u0000${event.code ?? ''}`)
    this.#duration.observe(event.kind, event.duration_ms / 1000)
  }

  response (route: string, status: number): void {
    this.#responses.inc(`${route}\u0000${status}`)
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
      case 'judge_call': this.#judgeCalls.inc(event.outcome); break
      case 'judge_tokens':
        this.#judgeTokens.inc('prompt', event.prompt)
        this.#judgeTokens.inc('completion', event.completion)
        break
      case 'judge_cache_hit': this.#judgeCacheHits.inc(''); break
    }
  }

  async text (): Promise<string> {
    return this.#verifications.render() + this.#duration.render() + this.#responses.render() +
      this.#judgeCalls.render() + this.#judgeTokens.render() + this.#judgeCacheHits.render() + await this.registry.metrics()
  }

  get contentType (): string {
    return this.registry.contentType
  }
}
