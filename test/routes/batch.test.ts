import t from 'tap'
import { buildTestApp, verifyBody } from '../helpers/build-app.js'
import { json, startUpstream } from '../helpers/upstream.js'

t.test('items are answered in order, each with its own result or error', async (t) => {
  const upstream = await startUpstream(t, async (request, response, received) => {
    const { trajectory } = JSON.parse(received.body) as { trajectory: string }
    // Later items answer first, so order comes from Arbiter, not from timing.
    await new Promise((resolve) => setTimeout(resolve, trajectory === 'slow' ? 60 : 1))
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end(JSON.stringify({ reward: trajectory === 'slow' ? 0.1 : 0.9 }))
  })
  const { app } = await buildTestApp(t)
  const items = [
    verifyBody('endpoint', upstream.url, { trajectory: 'slow' }),
    verifyBody('endpoint', upstream.url, { trajectory: 'fast' }),
    verifyBody('endpoint', 'http://169.254.169.254/'),
    { manifest: { verifier: { kind: 'builtin', ref: 'x' } }, task: {}, trajectory: 'x' },
    { task: {}, trajectory: 'no manifest' }
  ]
  const response = await app.inject({ method: 'POST', url: '/v1/verify/batch', payload: { items }, headers: { 'x-request-id': 'b1' } })
  t.equal(response.statusCode, 200)
  const body = response.json()
  t.equal(body.ok, 2)
  t.equal(body.failed, 3)
  t.equal(body.results.length, 5)
  t.match(body.results[0], { reward: 0.1, success: false, verifier: { kind: 'endpoint' } })
  t.match(body.results[1], { reward: 0.9, success: true })
  t.match(body.results[2], { statusCode: 502, code: 'ARB_ENDPOINT_FORBIDDEN', verifier: { kind: 'endpoint', ref: 'http://169.254.169.254/' }, retryable: false, requestId: 'b1#2' })
  t.match(body.results[3], { statusCode: 400, code: 'ARB_BAD_REQUEST', message: 'items[3]: manifest.verifier.kind must be one of rubric|plugin|endpoint' })
  t.match(body.results[4], { statusCode: 400, message: 'items[4]: manifest is required' })
  t.notOk('reward' in body.results[2], 'a failed item carries no reward')
})

t.test('one shared manifest with items of {task, trajectory}', async (t) => {
  const upstream = await startUpstream(t, json(200, { reward: 1 }))
  const { app } = await buildTestApp(t)
  const manifest = { name: 'arith', verifier: { kind: 'endpoint', ref: upstream.url } }
  const items = Array.from({ length: 20 }, (_, i) => ({ task: { prompt: `q${i}` }, trajectory: `a${i}` }))
  const response = await app.inject({ method: 'POST', url: '/v1/verify/batch', payload: { manifest, items } })
  t.equal(response.statusCode, 200)
  t.equal(response.json().ok, 20)
  t.same(upstream.received.map((r) => JSON.parse(r.body).trajectory).sort(), items.map((i) => i.trajectory).sort())
})

t.test('concurrency is bounded by ARBITER_BATCH_CONCURRENCY', async (t) => {
  let active = 0
  let peak = 0
  const upstream = await startUpstream(t, async (_request, response) => {
    active++
    peak = Math.max(peak, active)
    await new Promise((resolve) => setTimeout(resolve, 10))
    active--
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end('{"reward": 1}')
  })
  const { app } = await buildTestApp(t, { batchConcurrency: 3 })
  const items = Array.from({ length: 12 }, () => ({ task: {}, trajectory: 'x' }))
  const response = await app.inject({ method: 'POST', url: '/v1/verify/batch', payload: { manifest: { verifier: { kind: 'endpoint', ref: upstream.url } }, items } })
  t.equal(response.json().ok, 12)
  t.equal(peak, 3)
})

t.test('a malformed envelope or too many items is a 400 for the whole call', async (t) => {
  const { app } = await buildTestApp(t, { batchMaxItems: 4 })
  const cases: Array<[string, unknown, RegExp]> = [
    ['no items', { manifest: { verifier: { kind: 'endpoint', ref: 'http://127.0.0.1:9/' } } }, /items is required/],
    ['items not an array', { items: { task: {} } }, /^items /],
    ['empty items', { items: [] }, /^items /],
    ['too many items', { items: Array.from({ length: 5 }, () => ({ task: {}, trajectory: 'x' })) }, /^items /],
    ['an item that is not an object', { items: ['x'] }, /^items\.0 /],
    ['unknown envelope field', { items: [{}], extra: 1 }, /./]
  ]
  for (const [name, payload, message] of cases) {
    const response = await app.inject({ method: 'POST', url: '/v1/verify/batch', payload: payload as object })
    t.equal(response.statusCode, 400, name)
    t.equal(response.json().code, 'ARB_BAD_REQUEST', name)
    t.match(response.json().message, message, name)
  }
})
