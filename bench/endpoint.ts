// Issue 2's benchmark: /v1/verify with the endpoint kind against a local upstream, next to the
// bare-Fastify baseline and the upstream hit directly, all in one run, 10 connections.
// Goals: endpoint throughput >= 0.35 of the direct upstream; p50 added latency < 1 ms.
import { BASELINE_JS, PROXY_JS, SERVER_JS, UPSTREAM_JS, goal, load, measure, report, start, verifyPayload } from './harness.js'

const connections = 10
const upstream = await start(UPSTREAM_JS)
const baseline = await start(BASELINE_JS)
const proxy = await start(PROXY_JS, { UPSTREAM_URL: `${upstream.url}/score` })
const arbiter = await start(SERVER_JS, { LOG_LEVEL: 'info' })
const body = verifyPayload('endpoint', `${upstream.url}/score`)

// Warm up connection pools and JIT before measuring.
await load({ url: `${arbiter.url}/v1/verify`, body, connections, durationS: 2 })

const rows = [
  { name: 'baseline: bare Fastify POST (same schema)', result: await measure(baseline, { url: `${baseline.url}/v1/verify`, body, connections, latencyS: 3 }) },
  { name: 'upstream direct', result: await measure(upstream, { url: `${upstream.url}/score`, body, connections, latencyS: 3 }) },
  { name: 'reference: plain undici proxy hop', result: await measure(proxy, { url: `${proxy.url}/v1/verify`, body, connections, latencyS: 3 }) },
  { name: 'arbiter /v1/verify endpoint (logging on)', result: await measure(arbiter, { url: `${arbiter.url}/v1/verify`, body, connections, latencyS: 3 }) }
]
report(`endpoint kind, ${connections} connections`, rows, 'upstream direct')
const [base, direct, plain, verify] = rows.map((row) => row.result)
console.log(`arbiter / baseline: ${(verify.rps / base.rps).toFixed(3)}; plain proxy / direct: ${(plain.rps / direct.rps).toFixed(3)}; arbiter / plain proxy: ${(verify.rps / plain.rps).toFixed(3)}`)
goal('endpoint req/s vs direct upstream', verify.rps / direct.rps, 0.35)
goal('p50 added latency (ms)', verify.p50Ms - direct.p50Ms, 1, false)
for (const server of [arbiter, proxy, baseline, upstream]) await server.stop()
