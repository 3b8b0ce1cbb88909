// Issue 4's benchmark: /v1/verify with a rubric verifier against a local OpenAI-compatible judge
// that answers at once, next to the bare-Fastify baseline, at 50 connections, in interleaved
// rounds. The judged row (cache off) is Arbiter's own overhead per judged verification: prompt
// building, the judge round trip through its pool, answer checking and scoring. The cache-hit
// row is the same request served from the verdict cache.
// Two ceilings are measured in the same run, to read the goals against: a plain Fastify + undici
// proxy hop to the same judge (forwarding only: no prompt, no checks, no logging) bounds the
// judged row; Arbiter's own path with a kind that answers at once bounds the cache-hit row.
// Goals: rubric req/s >= 0.4 of the baseline; a cache hit >= 0.8 of the baseline.
// Run: npm run build && node dist/bench/rubric.js (BENCH_SECONDS, BENCH_ROUNDS).
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { AT_ONCE_BODY, BASELINE_JS, BENCH_ROUNDS, BENCH_SECONDS, PROXY_JS, SERVER_JS, TRIVIAL_JS, goal, interleave, report, start, verifyPayload, type Running } from './harness.js'
import { chatCompletion } from '../test/helpers/fake-judge.js'

const connections = 50
const RUBRICS = fileURLToPath(new URL('../../examples/rubrics/', import.meta.url))
const REF = 'alice/arithmetic-correctness'

// The judge: answers every chat completion at once with a valid verdict for the rubric above.
const completion = JSON.stringify(chatCompletion({
  model: 'bench-judge',
  content: JSON.stringify({
    dimension_scores: [
      { dimension: 'correctness', reason: 'the final answer is 4', unmet_criteria: [], score: 1 },
      { dimension: 'working', reason: 'no working shown', unmet_criteria: ['C3'], score: 0.5 }
    ],
    evidence: ['The answer is 4'],
    confidence: 0.9
  }),
  usage: { prompt_tokens: 400, completion_tokens: 60, total_tokens: 460 }
}))
let judged = 0
const judge = createServer((req, res) => {
  req.resume()
  req.on('end', () => {
    judged++
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(completion)
  })
})
await new Promise<void>((resolve) => judge.listen(0, '127.0.0.1', resolve))
const judgeUrl = `http://127.0.0.1:${(judge.address() as AddressInfo).port}/v1`

const arbiterEnv = (cacheSize: number): Record<string, string> => ({
  LOG_LEVEL: 'info',
  ARBITER_RUBRICS_DIR: RUBRICS,
  ARBITER_JUDGE_BASE_URL: judgeUrl,
  ARBITER_JUDGE_MODEL: 'bench-judge',
  ARBITER_JUDGE_API_KEY: 'sk-bench',
  ARBITER_JUDGE_CACHE_SIZE: String(cacheSize)
})
const body = verifyPayload('rubric', REF)

// Check once that the answer is a real verdict, so the bench never measures a fast 502.
async function check (server: Running): Promise<void> {
  const response = await fetch(`${server.url}/v1/verify`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
  const text = await response.text()
  if (response.status !== 200) throw new Error(`/v1/verify answered ${response.status}: ${text}`)
}

const baseline = await start(BASELINE_JS)
const atOnce = await start(TRIVIAL_JS)
const proxy = await start(PROXY_JS, { UPSTREAM_URL: `${judgeUrl}/chat/completions` })
const cacheOff = await start(SERVER_JS, arbiterEnv(0))
const cacheOn = await start(SERVER_JS, arbiterEnv(10_000))
await check(cacheOff)
await check(cacheOn)

const names = {
  baseline: 'baseline: bare Fastify POST (same schema)',
  proxy: 'ceiling: plain proxy hop to the judge',
  judged: 'arbiter /v1/verify rubric, judge, cache off',
  atOnce: 'ceiling: arbiter, a kind answering at once',
  hit: 'arbiter /v1/verify rubric, cache hit'
}
const judgedBefore = judged
const rows = await interleave([
  { name: names.baseline, url: `${baseline.url}/v1/verify`, body, server: baseline },
  { name: names.proxy, url: `${proxy.url}/v1/verify`, body, server: proxy },
  { name: names.judged, url: `${cacheOff.url}/v1/verify`, body, server: cacheOff },
  { name: names.atOnce, url: `${atOnce.url}/v1/verify`, body: AT_ONCE_BODY, server: atOnce },
  { name: names.hit, url: `${cacheOn.url}/v1/verify`, body, server: cacheOn }
], connections)
const judgeCalls = judged - judgedBefore
for (const server of [baseline, atOnce, proxy, cacheOff, cacheOn]) await server.stop()
await new Promise<void>((resolve) => judge.close(() => resolve()))

report(`rubric kind, ${connections} connections, median of ${BENCH_ROUNDS} interleaved rounds of ${BENCH_SECONDS} s`, rows, names.baseline)
const rps = (name: string): number => rows.find((row) => row.name === name)?.result.rps ?? Number.NaN
console.log(`judge calls: ${judgeCalls} (the proxy and the cache-off server call the judge; the cache-hit server only once, in its check)`)
console.log(`judged / plain proxy hop: ${(rps(names.judged) / rps(names.proxy)).toFixed(3)}; cache hit / a kind answering at once: ${(rps(names.hit) / rps(names.atOnce)).toFixed(3)}`)
goal('rubric (cache off) req/s vs baseline', rps(names.judged) / rps(names.baseline), 0.4)
goal('rubric cache hit req/s vs baseline', rps(names.hit) / rps(names.baseline), 0.8)
