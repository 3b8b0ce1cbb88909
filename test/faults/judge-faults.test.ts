// Network faults from the judge's side: a rubric verification against a judge that drips,
// resets, never answers, closes at once or answers HTML is a 502 with a judge code naming the
// rubric, never a 200 and never a 0, and the service answers normally afterwards.
import t from 'tap'
import { buildTestApp, verifyBody } from '../helpers/build-app.js'
import { startFakeJudge } from '../helpers/fake-judge.js'
import { startFaultyServer } from '../helpers/faulty-server.js'

const EXPECTED: Record<string, string[]> = {
  drip: ['ARB_JUDGE_TIMEOUT'],
  'reset-mid-body': ['ARB_JUDGE_UNREACHABLE'],
  'black-hole': ['ARB_JUDGE_TIMEOUT'],
  'close-at-once': ['ARB_JUDGE_UNREACHABLE'],
  html: ['ARB_JUDGE_UNUSABLE'],
  ok: ['ARB_JUDGE_UNUSABLE'] // a scorer's answer is not a chat completion
}

t.test('every judge failure mode is a 502 naming the rubric', async (t) => {
  const faulty = await startFaultyServer(t)
  for (const [mode, codes] of Object.entries(EXPECTED)) {
    const { app } = await buildTestApp(t, { logLevel: 'silent', judgeBaseUrl: `${faulty.url}/${mode}`, judgeModel: 'm', judgeTimeoutS: 1 })
    const responses = await Promise.all(Array.from({ length: 5 }, async (_, i) =>
      await app.inject({ method: 'POST', url: '/v1/verify', payload: verifyBody('rubric', 'alice/arithmetic-correctness', { trajectory: `answer ${i}` }) })))
    for (const response of responses) {
      t.equal(response.statusCode, 502, `${mode}: status`)
      t.ok(codes.includes(response.json().code), `${mode}: ${response.json().code}`)
      t.same(response.json().verifier, { kind: 'rubric', ref: 'alice/arithmetic-correctness' }, `${mode}: names the rubric`)
    }
    t.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, `${mode}: still healthy`)
  }
})

t.test('after a judge outage, the next verification succeeds', async (t) => {
  const judge = await startFakeJudge([
    { status: 503, body: { error: 'down' } },
    { status: 503, body: { error: 'down' } },
    { status: 503, body: { error: 'down' } },
    { content: JSON.stringify({ dimension_scores: [{ dimension: 'correctness', reason: 'ok', unmet_criteria: [], score: 1 }, { dimension: 'working', reason: 'ok', unmet_criteria: [], score: 1 }], evidence: [], confidence: 1 }) }
  ])
  t.teardown(() => judge.close())
  const { app } = await buildTestApp(t, { logLevel: 'silent', judgeBaseUrl: judge.url, judgeModel: 'm' })
  const failed = await app.inject({ method: 'POST', url: '/v1/verify', payload: verifyBody('rubric', 'alice/arithmetic-correctness') })
  t.equal(failed.statusCode, 502)
  t.equal(failed.json().code, 'ARB_JUDGE_HTTP_STATUS')
  t.equal(failed.json().retryable, true)
  const recovered = await app.inject({ method: 'POST', url: '/v1/verify', payload: verifyBody('rubric', 'alice/arithmetic-correctness') })
  t.equal(recovered.statusCode, 200)
  t.equal(recovered.json().reward, 1)
})
