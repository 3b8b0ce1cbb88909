// Load shedding: past the in-flight cap and the queue, a 503 with Retry-After at once.
import t from 'tap'
import { buildTestApp, verifyBody } from '../helpers/build-app.js'
import { startUpstream } from '../helpers/upstream.js'

t.test('a flood past a small cap gets 503s with Retry-After and no other failure', async (t) => {
  const upstream = await startUpstream(t, (_request, response) => {
    setTimeout(() => {
      response.writeHead(200, { 'content-type': 'application/json' })
      response.end('{"reward": 1}')
    }, 100)
  })
  const { app } = await buildTestApp(t, { maxInFlight: 2, maxQueue: 3 })
  const responses = await Promise.all(Array.from({ length: 20 }, async () =>
    await app.inject({ method: 'POST', url: '/v1/verify', payload: verifyBody('endpoint', upstream.url) })))
  const byStatus = new Map<number, number>()
  for (const response of responses) byStatus.set(response.statusCode, (byStatus.get(response.statusCode) ?? 0) + 1)
  t.equal(byStatus.get(200), 5, 'two in flight plus three queued')
  t.equal(byStatus.get(503), 15)
  t.same([...byStatus.keys()].sort(), [200, 503])
  for (const response of responses.filter((r) => r.statusCode === 503)) {
    t.equal(response.headers['retry-after'], '1')
    t.match(response.json(), { code: 'ARB_OVERLOADED', retryable: true })
  }
  t.equal(upstream.received.length, 5, 'refused work never reached the scorer')
  t.equal(app.arbiter.admission.inFlight, 0)
})

t.test('a lagging event loop sheds verifications but not health checks', async (t) => {
  const { app } = await buildTestApp(t, { maxEventLoopDelayMs: 20 })
  // Keep the loop stuck in 100 ms slices for longer than under-pressure's one-second sampling
  // window, so the mean delay it measures is well over the 20 ms limit.
  const end = Date.now() + 1500
  while (Date.now() < end) {
    const slice = Date.now() + 100
    while (Date.now() < slice) { /* a stuck loop, on purpose */ }
    await new Promise((resolve) => setImmediate(resolve))
  }
  const refused = await app.inject({ method: 'POST', url: '/v1/verify', payload: verifyBody('endpoint', 'http://127.0.0.1:9/') })
  if (refused.statusCode === 503) {
    t.equal(refused.json().code, 'ARB_OVERLOADED')
    t.equal(refused.headers['retry-after'], '1')
    t.match(refused.json().message, /under pressure/)
  } else {
    t.fail(`expected a 503 while the loop lagged, got ${refused.statusCode}`)
  }
  t.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200)
})
