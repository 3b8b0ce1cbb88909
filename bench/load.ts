// The load generator, run as its own process so it does not share an event loop with a server.
// autocannon gives throughput; a second, shorter closed loop over undici timed with hrtime gives
// latency percentiles in microseconds (autocannon rounds to whole milliseconds).
// Usage: node dist/bench/load.js '<json LoadSpec>' → prints one JSON LoadResult.
import autocannon from 'autocannon'
import { Pool } from 'undici'

export interface LoadSpec {
  url: string
  body: string
  connections: number
  durationS: number
  /** Seconds of precise latency sampling after the throughput run (0: skip). */
  latencyS: number
}

export interface LoadResult {
  rps: number
  p50Ms: number
  p99Ms: number
  errors: number
  non2xx: number
  /** Requests sent, throughput and latency passes together. */
  total: number
}

async function throughput (spec: LoadSpec): Promise<{ rps: number, errors: number, non2xx: number, total: number, p50: number, p99: number }> {
  const result = await autocannon({
    url: spec.url,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: spec.body,
    connections: spec.connections,
    duration: spec.durationS
  })
  return { rps: result.requests.average, errors: result.errors + result.timeouts, non2xx: result.non2xx, total: result.requests.total, p50: result.latency.p50, p99: result.latency.p99 }
}

async function latency (spec: LoadSpec): Promise<{ p50: number, p99: number, errors: number, count: number }> {
  const url = new URL(spec.url)
  const pool = new Pool(url.origin, { connections: spec.connections })
  const samples: number[] = []
  let errors = 0
  const until = performance.now() + spec.latencyS * 1000
  await Promise.all(Array.from({ length: spec.connections }, async () => {
    while (performance.now() < until) {
      const started = process.hrtime.bigint()
      try {
        const { statusCode, body } = await pool.request({ path: url.pathname, method: 'POST', headers: { 'content-type': 'application/json' }, body: spec.body })
        await body.dump()
        if (statusCode !== 200) errors++
      } catch { errors++ }
      samples.push(Number(process.hrtime.bigint() - started) / 1e6)
    }
  }))
  await pool.close()
  samples.sort((a, b) => a - b)
  const at = (q: number): number => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))] ?? Number.NaN
  return { p50: at(0.5), p99: at(0.99), errors, count: samples.length }
}

const spec = JSON.parse(process.argv[2] ?? '{}') as LoadSpec
const run = await throughput(spec)
const precise = spec.latencyS > 0 ? await latency(spec) : { p50: run.p50, p99: run.p99, errors: 0, count: 0 }
const result: LoadResult = { rps: run.rps, p50Ms: precise.p50, p99Ms: precise.p99, errors: run.errors + precise.errors, non2xx: run.non2xx, total: run.total + precise.count }
process.stdout.write(JSON.stringify(result) + '\n')
