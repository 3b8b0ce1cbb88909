// The HTTP surface of /v1/verify: what a malformed request gets, request ids, logging.
import t from 'tap'
import { buildTestApp, verifyBody } from '../helpers/build-app.js'
import { json, startUpstream } from '../helpers/upstream.js'

const post = (payload: unknown, headers: Record<string, string> = {}) => ({
  method: 'POST' as const,
  url: '/v1/verify',
  payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
  headers: { 'content-type': 'application/json', ...headers }
})

t.test('a malformed request is a 400 whose message names the field', async (t) => {
  const { app } = await buildTestApp(t)
  const good = verifyBody('endpoint', 'http://127.0.0.1:9/score')
  const cases: Array<[string, unknown, RegExp]> = [
    ['kind not one of the three', verifyBody('builtin', 'x'), /^manifest\.verifier\.kind must be one of rubric\|plugin\|endpoint$/],
    ['ref missing', { ...good, manifest: { verifier: { kind: 'endpoint' } } }, /^manifest\.verifier\.ref is required$/],
    ['ref empty', verifyBody('endpoint', ''), /manifest\.verifier\.ref/],
    ['manifest missing', { task: {}, trajectory: 'x' }, /^manifest is required$/],
    ['verifier missing', { ...good, manifest: { name: 'x' } }, /^manifest\.verifier is required$/],
    ['task not an object', { ...good, task: 'What is 2+2?' }, /^task /],
    ['task an array', { ...good, task: [1] }, /^task /],
    ['trajectory missing', { manifest: good.manifest, task: {} }, /^trajectory is required$/],
    ['timeout_s negative', verifyBody('endpoint', 'http://127.0.0.1:9/', { verifier: { timeout_s: -1 } }), /manifest\.verifier\.timeout_s/],
    ['timeout_s null is not coerced to 0', verifyBody('endpoint', 'http://127.0.0.1:9/', { verifier: { timeout_s: null } }), /manifest\.verifier\.timeout_s/],
    ['pass_threshold a string', verifyBody('endpoint', 'http://127.0.0.1:9/', { verifier: { pass_threshold: '0.5' } }), /manifest\.verifier\.pass_threshold/],
    ['plugin ref of the wrong form', verifyBody('plugin', '../../etc/passwd:read'), /manifest\.verifier\.ref must be module:callable/],
    ['plugin callable not an identifier', verifyBody('plugin', 'verify:score-it'), /manifest\.verifier\.ref must be module:callable/],
    ['rubric ref of the wrong form', verifyBody('rubric', 'arithmetic'), /manifest\.verifier\.ref must be owner\/name/],
    ['rubric version zero', verifyBody('rubric', 'alice/arith@0'), /manifest\.verifier\.ref/],
    ['body an array', [good], /body|must be object/],
    ['body null', 'null', /body/]
  ]
  for (const [name, payload, message] of cases) {
    const response = await app.inject(post(payload))
    t.equal(response.statusCode, 400, name)
    const body = response.json()
    t.equal(body.code, 'ARB_BAD_REQUEST', name)
    t.match(body.message, message, name)
    t.equal(body.retryable, false, name)
    t.type(body.requestId, 'string', name)
  }
})

t.test('a body that is not JSON', async (t) => {
  const { app } = await buildTestApp(t)
  const text = await app.inject({ method: 'POST', url: '/v1/verify', payload: 'reward please', headers: { 'content-type': 'text/plain' } })
  t.equal(text.statusCode, 415)
  t.equal(text.json().code, 'ARB_UNSUPPORTED_MEDIA_TYPE')
  t.match(text.json().message, /application\/json/)

  const broken = await app.inject(post('{"manifest": '))
  t.equal(broken.statusCode, 400)
  t.match(broken.json().message, /^body is not valid JSON/)

  const empty = await app.inject(post(''))
  t.equal(empty.statusCode, 400)
  t.equal(empty.json().code, 'ARB_BAD_REQUEST')
})

t.test('prototype-poisoning keys are refused', async (t) => {
  const { app } = await buildTestApp(t)
  const response = await app.inject(post('{"manifest":{"verifier":{"kind":"endpoint","ref":"http://127.0.0.1:9/"}},"task":{"__proto__":{"admin":true}},"trajectory":"x"}'))
  t.equal(response.statusCode, 400)
  t.equal(({} as Record<string, unknown>).admin, undefined)
})

t.test('a body over the limit is a 413 that says the limit', async (t) => {
  const { app } = await buildTestApp(t, { bodyLimit: 1024 })
  const response = await app.inject(post(verifyBody('endpoint', 'http://127.0.0.1:9/', { trajectory: 'x'.repeat(2048) })))
  t.equal(response.statusCode, 413)
  t.equal(response.json().code, 'ARB_BODY_TOO_LARGE')
  t.match(response.json().message, /ARBITER_BODY_LIMIT/)
})

t.test('the default body limit takes 16 MiB trajectories', async (t) => {
  const upstream = await startUpstream(t, json(200, { reward: 1 }))
  const { app } = await buildTestApp(t)
  const response = await app.inject(post(verifyBody('endpoint', upstream.url, { trajectory: 'x'.repeat(15 * 1024 * 1024) })))
  t.equal(response.statusCode, 200)
  t.equal(upstream.received[0].body.length > 15 * 1024 * 1024, true, 'the scorer got the whole trajectory')
})

t.test('nesting deeper than the limit is a 400, not a crash', async (t) => {
  const { app } = await buildTestApp(t)
  const deep = '['.repeat(300) + ']'.repeat(300)
  const response = await app.inject(post(`{"manifest":{"verifier":{"kind":"endpoint","ref":"http://127.0.0.1:9/"}},"task":{},"trajectory":${deep}}`))
  t.equal(response.statusCode, 400)
  t.match(response.json().message, /ARBITER_MAX_DEPTH/)

  const abyss = '{"a":'.repeat(200_000) + '1' + '}'.repeat(200_000)
  const crashed = await app.inject(post(`{"manifest":{"verifier":{"kind":"endpoint","ref":"http://127.0.0.1:9/"}},"task":${abyss},"trajectory":"x"}`))
  t.equal(crashed.statusCode, 400)
  const alive = await app.inject({ method: 'GET', url: '/healthz' })
  t.equal(alive.statusCode, 200, 'the service still answers')
})

t.test('x-request-id is taken from the caller, else generated, and echoed', async (t) => {
  const { app } = await buildTestApp(t)
  const given = await app.inject(post(verifyBody('builtin', 'x'), { 'x-request-id': 'grpo-run-7/step-400/sample-3' }))
  t.equal(given.headers['x-request-id'], 'grpo-run-7/step-400/sample-3')
  t.equal(given.json().requestId, 'grpo-run-7/step-400/sample-3')

  const generated = await app.inject(post(verifyBody('builtin', 'x')))
  t.match(generated.headers['x-request-id'], /^[0-9a-f-]{36}$/)
  t.equal(generated.json().requestId, generated.headers['x-request-id'])

  const hostile = await app.inject(post(verifyBody('builtin', 'x'), { 'x-request-id': 'a b\u0000c'.repeat(60) }))
  t.match(hostile.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'an unusable id is replaced, not echoed')
})

t.test('one summary log line per verification; no bodies and no secrets in the log', async (t) => {
  const upstream = await startUpstream(t, json(200, { reward: 0.25 }))
  const test = await buildTestApp(t)
  const trajectory = 'SECRET-TRAJECTORY-TEXT'
  const ok = await test.app.inject(post(verifyBody('endpoint', upstream.url, { trajectory }), { authorization: 'Bearer TOKEN-123', 'x-api-key': 'KEY-456', 'x-request-id': 'req-ok' }))
  t.equal(ok.statusCode, 200)
  const failed = await test.app.inject(post(verifyBody('endpoint', 'http://169.254.169.254/'), { 'x-request-id': 'req-bad' }))
  t.equal(failed.statusCode, 502)

  const lines = test.logs.filter((line) => line.msg === 'verification')
  t.equal(lines.length, 2)
  t.match(lines[0], { requestId: 'req-ok', kind: 'endpoint', ref: upstream.url, outcome: 'ok', reward: 0.25 })
  t.type(lines[0].duration_ms, 'number')
  t.match(lines[1], { requestId: 'req-bad', kind: 'endpoint', outcome: 'error', code: 'ARB_ENDPOINT_FORBIDDEN' })
  t.equal(test.logs.filter((line) => line.msg === 'incoming request' || line.msg === 'request completed').length, 0, 'Fastify\'s per-request lines are off')
  const text = test.logText()
  t.notMatch(text, /SECRET-TRAJECTORY-TEXT/, 'bodies are never logged')
  t.notMatch(text, /TOKEN-123/)
  t.notMatch(text, /KEY-456/)
})

t.test('error bodies keep every declared field through the serializer', async (t) => {
  const { app } = await buildTestApp(t)
  const response = await app.inject(post(verifyBody('endpoint', 'http://169.254.169.254/'), { 'x-request-id': 'r1' }))
  t.same(Object.keys(response.json()).sort(), ['code', 'error', 'message', 'requestId', 'retryable', 'statusCode', 'verifier'])
  t.match(response.json(), { statusCode: 502, error: 'Bad Gateway', verifier: { kind: 'endpoint', ref: 'http://169.254.169.254/' }, retryable: false, requestId: 'r1' })
})

t.test('unknown routes are a JSON 404 pointing at GET /', async (t) => {
  const { app } = await buildTestApp(t)
  const response = await app.inject({ method: 'GET', url: '/v1/verfy' })
  t.equal(response.statusCode, 404)
  t.equal(response.json().code, 'ARB_NOT_FOUND')
  t.match(response.json().message, /GET \/ lists the routes/)
})
