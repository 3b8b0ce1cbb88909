import t from 'tap'
import { buildTestApp, verifyBody } from '../helpers/build-app.js'
import { json, startUpstream } from '../helpers/upstream.js'

function sample (text: string, name: string, labels: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`) || (labels === '' && l.startsWith(`${name} `)))
  return line === undefined ? Number.NaN : Number(line.split(' ').pop())
}

t.test('verifications by kind, outcome and code; durations; retries; in flight; process metrics', async (t) => {
  let calls = 0
  const upstream = await startUpstream(t, (_request, response) => {
    calls++
    if (calls === 1) { response.writeHead(503, { 'retry-after': '0' }); response.end(); return }
    json(200, { reward: 1 })(_request, response, undefined as never)
  })
  const { app } = await buildTestApp(t)
  await app.inject({ method: 'POST', url: '/v1/verify', payload: verifyBody('endpoint', upstream.url) })
  await app.inject({ method: 'POST', url: '/v1/verify', payload: verifyBody('endpoint', upstream.url) })
  await app.inject({ method: 'POST', url: '/v1/verify', payload: verifyBody('endpoint', 'http://169.254.169.254/') })
  const response = await app.inject({ method: 'GET', url: '/metrics' })
  t.equal(response.statusCode, 200)
  t.match(response.headers['content-type'], /text\/plain/)
  const text = response.body
  t.equal(sample(text, 'arbiter_verifications_total', 'kind="endpoint",outcome="ok",code=""'), 2)
  t.equal(sample(text, 'arbiter_verifications_total', 'kind="endpoint",outcome="error",code="ARB_ENDPOINT_FORBIDDEN"'), 1)
  t.equal(sample(text, 'arbiter_verification_duration_seconds_count', 'kind="endpoint"'), 3)
  t.equal(sample(text, 'arbiter_endpoint_retries_total', 'reason="ARB_ENDPOINT_HTTP_STATUS"'), 1)
  t.equal(sample(text, 'arbiter_verifications_in_flight', ''), 0)
  t.equal(sample(text, 'arbiter_http_responses_total', 'route="/v1/verify",status="200"'), 2)
  t.equal(sample(text, 'arbiter_http_responses_total', 'route="/v1/verify",status="502"'), 1)
  t.match(text, /process_cpu_user_seconds_total/)
  t.match(text, /nodejs_eventloop_lag_seconds/)
})

t.test('judge calls, tokens and cache hits are counted', async (t) => {
  const { startFakeJudge } = await import('../helpers/fake-judge.js')
  const judge = await startFakeJudge(() => ({
    content: JSON.stringify({ dimension_scores: [{ dimension: 'correctness', reason: 'right', unmet_criteria: [], score: 1 }, { dimension: 'working', reason: 'shown', unmet_criteria: [], score: 1 }], evidence: ['4'], confidence: 0.9 }),
    usage: { prompt_tokens: 300, completion_tokens: 40, total_tokens: 340 }
  }))
  t.teardown(() => judge.close())
  const { app } = await buildTestApp(t, { judgeBaseUrl: judge.url, judgeModel: 'fake-judge-1' })
  const payload = verifyBody('rubric', 'alice/arithmetic-correctness')
  t.equal((await app.inject({ method: 'POST', url: '/v1/verify', payload })).statusCode, 200)
  t.equal((await app.inject({ method: 'POST', url: '/v1/verify', payload })).json().cached, true)
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body
  t.equal(sample(text, 'arbiter_judge_calls_total', 'outcome="ok"'), 1)
  t.equal(sample(text, 'arbiter_judge_tokens_total', 'type="prompt"'), 300)
  t.equal(sample(text, 'arbiter_judge_tokens_total', 'type="completion"'), 40)
  t.equal(sample(text, 'arbiter_judge_cache_hits_total', ''), 1)
  t.equal(sample(text, 'arbiter_verifications_total', 'kind="rubric",outcome="ok",code=""'), 2)
})

t.test('plugin worker starts, crashes and timeouts are counted', async (t) => {
  const { fileURLToPath } = await import('node:url')
  const pluginsDir = fileURLToPath(new URL('../fixtures/soak-plugins', import.meta.url))
  const { app } = await buildTestApp(t, { pluginsDir, pluginWorkers: 1 })
  const call = async (ref: string, timeoutS?: number) => await app.inject({ method: 'POST', url: '/v1/verify', payload: verifyBody('plugin', ref, { manifest: { name: 'chaos' }, verifier: timeoutS === undefined ? {} : { timeout_s: timeoutS } }) })
  t.equal((await call('chaos:ok')).statusCode, 200)
  t.equal((await call('chaos:crash')).json().code, 'ARB_PLUGIN_CRASHED')
  t.equal((await call('chaos:hang', 0.5)).json().code, 'ARB_PLUGIN_TIMEOUT')
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body
  t.ok(sample(text, 'arbiter_plugin_worker_starts_total', 'plugin="chaos"') >= 2, 'a worker was started, and replaced after the crash')
  t.equal(sample(text, 'arbiter_plugin_worker_crashes_total', 'plugin="chaos"'), 1)
  t.equal(sample(text, 'arbiter_plugin_timeouts_total', 'plugin="chaos"'), 1)
})
