// Issue 2's benchmark: /v1/verify with the endpoint kind against a local upstream, next to the
// bare-Fastify baseline, the upstream hit directly and a plain undici proxy hop (the ceiling for
// any service that forwards to the upstream), in interleaved rounds, 10 connections.
// Goals: endpoint throughput >= 0.35 of the direct upstream; p50 added latency < 1 ms.
import { BASELINE_JS, BENCH_ROUNDS, BENCH_SECONDS, PROXY_JS, SERVER_JS, UPSTREAM_JS, goal, interleave, report, start, verifyPayload } from './harness.js'

const connections = 10
const upstream = await start(UPSTREAM_JS)
const baseline = await start(BASELINE_JS)
const proxy = await start(PROXY_JS, { UPSTREAM_URL: `${upstream.url}/score` })
const arbiter = await start(SERVER_JS, { LOG_LEVEL: 'info' })
const body = verifyPayload('endpoint', `${upstream.url}/score`)

const rows = await interleave([
  { name: 'baseline: bare Fastify POST (same schema)', url: `${baseline.url}/v1/verify`, body, server: baseline },
  { name: 'upstream direct', url: `${upstream.url}/score`, body, server: upstream },
  { name: 'reference: plain undici proxy hop', url: `${proxy.url}/v1/verify`, body, server: proxy },
  { name: 'arbiter /v1/verify endpoint (logging on)', url: `${arbiter.url}/v1/verify`, body, server: arbiter }
], connections)
for (const server of [arbiter, proxy, baseline, upstream]) await server.stop()
report(`endpoint kind, ${connections} connections, median of ${BENCH_ROUNDS} interleaved rounds of ${BENCH_SECONDS} s`, rows, 'upstream direct')
const [base, direct, plain, verify] = rows.map((row) => row.result)
console.log(`arbiter / baseline: ${(verify.rps / base.rps).toFixed(3)}; plain proxy / direct: ${(plain.rps / direct.rps).toFixed(3)}; arbiter / plain proxy: ${(verify.rps / plain.rps).toFixed(3)}`)
goal('endpoint req/s vs direct upstream', verify.rps / direct.rps, 0.35)
goal('p50 added latency (ms)', verify.p50Ms - direct.p50Ms, 1, false)
