// Issue 4's benchmark: /v1/verify with a rubric verifier against a local OpenAI-compatible judge
// that answers at once, next to the bare-Fastify baseline, all in one run at 50 connections.
// The rubric row (cache off) is Arbiter's own overhead per judged verification: prompt building,
// the judge round trip through its pool, answer checking and scoring. The cache-hit row is the
// same request served from the verdict cache.
// Goals: rubric req/s >= 0.4 of the baseline; a cache hit >= 0.8 of the baseline.
// Run: npm run build && node dist/bench/rubric.js (BENCH_SECONDS sets each run's length).
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { BASELINE_JS, SERVER_JS, goal, load, report, start, verifyPayload } from './harness.js'
import type { LoadResult } from './load.js'
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
async function check (url: string): Promise<void> {
  const response = await fetch(`${url}/v1/verify`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
  const text = await response.text()
  if (response.status !== 200) throw new Error(`/v1/verify answered ${response.status}: ${text}`)
}

/** Starts a server, warms it up, measures one run (and the judge calls it made), stops it. */
async function run (script: string, env: Record<string, string> = {}): Promise<{ result: LoadResult, judgeCalls: number }> {
  const server = await start(script, env)
  const url = `${server.url}/v1/verify`
  if (script === SERVER_JS) await check(server.url)
  await load({ url, body, connections, durationS: 2 })
  const before = judged
  const result = await load({ url, body, connections })
  const judgeCalls = judged - before
  await server.stop()
  return { result, judgeCalls }
}

const { result: base } = await run(BASELINE_JS)
const { result: rubric, judgeCalls } = await run(SERVER_JS, arbiterEnv(0))
const { result: hit, judgeCalls: hitJudgeCalls } = await run(SERVER_JS, arbiterEnv(10_000))

report(`rubric kind, ${connections} connections`, [
  { name: 'baseline: bare Fastify POST (same schema)', result: base },
  { name: 'arbiter /v1/verify rubric, judge, cache off', result: rubric },
  { name: 'arbiter /v1/verify rubric, cache hit', result: hit }
], 'baseline: bare Fastify POST (same schema)')
console.log(`judge calls during the cache-off run: ${judgeCalls} (requests: ${rubric.total}); during the cache-hit run: ${hitJudgeCalls}`)
goal('rubric (cache off) req/s vs baseline', rubric.rps / base.rps, 0.4)
goal('rubric cache hit req/s vs baseline', hit.rps / base.rps, 0.8)
await new Promise<void>((resolve) => judge.close(() => resolve()))
