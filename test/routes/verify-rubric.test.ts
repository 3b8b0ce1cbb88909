// POST /v1/verify with a rubric verifier through the whole HTTP stack (app.inject), against a
// real judge on 127.0.0.1: a 200 carrying the RubricJudgeResult and its provenance, and a 502
// naming the rubric when the judge's answer is unusable.
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { buildTestApp, verifyBody } from '../helpers/build-app.js'
import { startFakeJudge, type FakeJudge } from '../helpers/fake-judge.js'

const API_KEY = 'sk-route-test-SECRET-42'
const EXAMPLES = fileURLToPath(new URL('../../examples/rubrics/', import.meta.url))

const GOOD = JSON.stringify({
  dimension_scores: [
    { dimension: 'correctness', reason: 'says 4', unmet_criteria: [], score: 1 },
    { dimension: 'working', reason: 'no steps', unmet_criteria: ['C3'], score: 0.2 }
  ],
  evidence: ['"The answer is 4"'],
  confidence: 0.95
})

/** The app as src/app.ts wires it: the rubric kind comes from the config alone. */
async function appWithJudge (t: Parameters<typeof buildTestApp>[0], judge: FakeJudge) {
  return await buildTestApp(t, { rubricsDir: EXAMPLES, judgeBaseUrl: judge.url, judgeApiKey: API_KEY, judgeModel: 'route-judge', judgeCacheSize: 0 })
}

t.test('200: the RubricJudgeResult with provenance survives serialization', async (t) => {
  const judge = await startFakeJudge([{ content: GOOD, model: 'route-judge-0613' }])
  t.teardown(judge.close)
  const { app, logText } = await appWithJudge(t, judge)
  const response = await app.inject({
    method: 'POST',
    url: '/v1/verify',
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify(verifyBody('rubric', 'alice/arithmetic-correctness', { trajectory: [{ role: 'assistant', content: 'The answer is 4' }] }))
  })
  t.equal(response.statusCode, 200, response.body)
  const body = response.json()
  t.equal(body.score, (3 * 1 + 1 * 0.2) / 4)
  t.equal(body.reward, body.score)
  t.equal(body.verdict, 'PASS')
  t.equal(body.confidence, 0.95)
  t.same(body.failed_criteria, ['Intermediate steps are shown'])
  t.same(body.dimension_scores.map((d: { dimension: string }) => d.dimension), ['correctness', 'working'])
  t.equal(body.truncated, false)
  t.equal(body.cached, false)
  t.notOk('error' in body, 'a 200 never carries error')
  t.type(body.duration_ms, 'number')
  t.match(body.verifier, {
    kind: 'rubric',
    ref: 'alice/arithmetic-correctness',
    version: 1,
    content_hash: /^sha256:[0-9a-f]{64}$/,
    judge_model: 'route-judge-0613',
    samples: 1,
    usage: { total_tokens: 120 }
  })
  // Every provenance field survives the response serializer, with its type (version: a number here).
  t.same(Object.keys(body.verifier).sort(), ['content_hash', 'disagreement', 'judge_calls', 'judge_model', 'judge_model_requested', 'kind', 'reasks', 'ref', 'response_format', 'rubric', 'samples', 'temperature', 'usage', 'version'])
  t.type(body.verifier.version, 'number')
  t.equal(judge.requests[0].headers.authorization, `Bearer ${API_KEY}`)
  t.notOk(logText().includes(API_KEY), 'the key is in no log line')
})

t.test('502: an unusable judge answer names the rubric, never a reward', async (t) => {
  const judge = await startFakeJudge([{ content: 'I think it is fine.' }, { content: '{"score": 1}' }])
  t.teardown(judge.close)
  const { app } = await appWithJudge(t, judge)
  const response = await app.inject({
    method: 'POST',
    url: '/v1/verify',
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify(verifyBody('rubric', 'alice/arithmetic-correctness@1'))
  })
  t.equal(response.statusCode, 502)
  const body = response.json()
  t.equal(body.code, 'ARB_JUDGE_UNUSABLE')
  t.same(body.verifier, { kind: 'rubric', ref: 'alice/arithmetic-correctness@1' })
  t.equal(body.retryable, false)
  t.match(body.message, /alice\/arithmetic-correctness@1: the judge's answer was unusable after one re-ask/)
  t.notOk('reward' in body)
  t.match(body.details, { problem: /dimension_scores must be an array/, raw: '{"score": 1}' }, 'the judge\'s raw text, cut short')
  t.type(body.requestId, 'string')
  t.equal(judge.requests.length, 2)
})

t.test('GET /v1/verifiers lists the rubrics and the judge, never the key', async (t) => {
  const judge = await startFakeJudge([])
  t.teardown(judge.close)
  const { app } = await appWithJudge(t, judge)
  const response = await app.inject({ method: 'GET', url: '/v1/verifiers' })
  t.equal(response.statusCode, 200)
  const rubric = response.json().kinds.rubric
  t.match(rubric, {
    available: true,
    rubrics: [
      { ref: 'alice/arithmetic-correctness', latest: 1, versions: [{ version: 1, format: 'yaml', content_hash: /^sha256:/ }] },
      { ref: 'alice/helpful-explanation', latest: 1, versions: [{ version: 1, format: 'markdown' }] }
    ],
    invalid: [],
    judge: { configured: true, model: 'route-judge', api_key_set: true }
  })
  t.notOk(response.body.includes(API_KEY))
})
